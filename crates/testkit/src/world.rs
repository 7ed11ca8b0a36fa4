//! The parts of a test world: the reference driver, and the objects and kubelet
//! directories that say a volume is bound, staged and published.

use crate::captured_log::CapturedLog;
use crate::service::{Service, ServiceError};
use crate::wait::wait_for;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use volhealth_csi::node_requests::{self, mount_capability};
use volhealth_csi::v1;
use volhealth_driver::condition::{Condition, StorageCondition};
use volhealth_driver::injection::{self, Injections, NodeStorageInjection, Side, VolumeInjection};
use volhealth_driver::state::StateDir;

/// Deadline of each CSI call a test makes.
const CSI_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a starting driver may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The reference driver serving Identity, Controller and Node on `<dir>/csi.sock`, with its
/// state in `<dir>/driver-state`.
pub struct Driver {
    /// The CSI endpoint (`unix://...`).
    pub endpoint: String,
    /// The driver name it reports.
    pub name: String,
    state: StateDir,
    config: volhealth_driver::DriverConfig,
    log: Option<CapturedLog>,
    /// `None` once killed by [`Driver::kill`], until [`Driver::restart`].
    service: Option<Service>,
}

impl Driver {
    /// Starts the driver for node `node_id`. Free-space checks are off, so the test's outcome
    /// does not depend on how full this machine's disk is, and volumes are plain directories.
    pub async fn start(dir: &Path, name: &str, node_id: &str) -> Driver {
        Driver::start_configured(dir, name, node_id, |_| {}).await
    }

    /// [`Driver::start`] with `configure` applied to the driver's configuration last (say, to
    /// speak the legacy VOLUME_CONDITION shape).
    pub async fn start_configured(
        dir: &Path,
        name: &str,
        node_id: &str,
        configure: impl FnOnce(&mut volhealth_driver::DriverConfig),
    ) -> Driver {
        Driver::start_maybe_logged(dir, name, node_id, None, configure).await
    }

    /// [`Driver::start_configured`] with everything the driver logs going to `log`.
    pub async fn start_configured_logged(
        dir: &Path,
        name: &str,
        node_id: &str,
        log: &CapturedLog,
        configure: impl FnOnce(&mut volhealth_driver::DriverConfig),
    ) -> Driver {
        Driver::start_maybe_logged(dir, name, node_id, Some(log), configure).await
    }

    async fn start_maybe_logged(
        dir: &Path,
        name: &str,
        node_id: &str,
        log: Option<&CapturedLog>,
        configure: impl FnOnce(&mut volhealth_driver::DriverConfig),
    ) -> Driver {
        let endpoint = format!("unix://{}", dir.join("csi.sock").display());
        let mut config =
            volhealth_driver::DriverConfig::new(endpoint, dir.join("driver-state"), node_id);
        config.driver_name = name.to_string();
        config.refresh_interval = Duration::from_millis(200);
        config.low_space_fraction = 0.0;
        config.full_space_bytes = 0;
        config.allow_mounts = false;
        configure(&mut config);
        let (endpoint, state_dir) = (config.endpoint.clone(), config.state_dir.clone());
        let mut driver = Driver {
            endpoint,
            name: name.to_string(),
            state: StateDir::new(state_dir),
            config,
            log: log.cloned(),
            service: None,
        };
        driver.serve().await;
        driver
    }

    /// Runs the driver's server with its configuration and waits until its socket answers.
    async fn serve(&mut self) {
        let config = self.config.clone();
        self.service = Some(Service::start_maybe_logged(
            "driver",
            self.log.as_ref(),
            move |shutdown| volhealth_driver::run(config, shutdown),
        ));
        let endpoint = self.endpoint.clone();
        wait_for(START_TIMEOUT, "the driver's socket", || async {
            volhealth_csi::client::connect(&endpoint, Duration::from_secs(1))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
    }

    /// Starts the driver's server again, with the same configuration on the same socket and
    /// state dir, after [`Driver::kill`].
    pub async fn restart(&mut self) {
        assert!(self.service.is_none(), "the driver is still serving");
        self.serve().await;
    }

    /// Changes what is injected into the driver's state dir, as `volhealth inject` does; a
    /// running driver answers its next RPC accordingly.
    pub fn update_injections(&self, change: impl FnOnce(&mut Injections)) {
        injection::update(&self.state, change).expect("writing an injection");
    }

    /// Creates a volume of 1 MiB through CreateVolume; returns its id.
    pub async fn create_volume(&self, name: &str) -> String {
        create_volume(&self.endpoint, name, Some(1 << 20)).await
    }

    /// Makes one side of the driver report `status` (a CSI number) with `reason` for a volume.
    pub fn inject_volume(&self, volume_id: &str, side: Side, status: i32, reason: &str) {
        self.inject_volume_message(
            volume_id,
            side,
            status,
            reason,
            &format!("injected {reason}"),
        );
    }

    /// [`Driver::inject_volume`] with the condition's message given; it replaces an injection
    /// of the same side, status and reason.
    pub fn inject_volume_message(
        &self,
        volume_id: &str,
        side: Side,
        status: i32,
        reason: &str,
        message: &str,
    ) {
        injection::update(&self.state, |i| {
            i.add_volume(VolumeInjection {
                volume_id: volume_id.to_string(),
                side,
                condition: Condition::new(status, reason, message),
            })
        })
        .expect("writing an injection");
    }

    /// The faults most tests start from, one on each side of a volume: the controller reports
    /// Degraded (`SlowDisk`), the node Inaccessible (`PathGone`).
    pub fn inject_both_sides(&self, volume_id: &str) {
        self.inject_volume(
            volume_id,
            Side::Controller,
            volhealth_driver::condition::volume_status::DEGRADED,
            "SlowDisk",
        );
        self.inject_volume(
            volume_id,
            Side::Node,
            volhealth_driver::condition::volume_status::INACCESSIBLE,
            "PathGone",
        );
    }

    /// Makes every call of `method` fail with gRPC `code` (a number) until [`Driver::clear_faults`].
    pub fn fail_method(&self, method: &str, code: i32) {
        injection::update(&self.state, |i| {
            i.set_fault(volhealth_driver::injection::RpcFault {
                method: method.to_string(),
                code,
                rate: 1.0,
                delay_ms: 0,
                message: None,
            })
        })
        .expect("writing an injection");
    }

    /// Removes every injected RPC fault.
    pub fn clear_faults(&self) {
        injection::update(&self.state, |i| i.rpc.clear()).expect("clearing an injection");
    }

    /// Removes a volume's injected conditions on every side.
    pub fn clear_volume(&self, volume_id: &str) {
        injection::update(&self.state, |i| i.clear_volume(volume_id, None))
            .expect("clearing an injection");
    }

    /// Makes the node plugin of `node` report a storage condition.
    pub fn inject_storage(&self, node: &str, status: i32, reason: &str) {
        injection::update(&self.state, |i| {
            i.add_node_storage(NodeStorageInjection {
                node: node.to_string(),
                condition: StorageCondition {
                    status,
                    reason: reason.to_string(),
                    message: format!("injected {reason}"),
                    access_mode: None,
                    volume_mode: None,
                },
            })
        })
        .expect("writing an injection");
    }

    /// Removes every injected storage condition.
    pub fn clear_storage(&self) {
        injection::update(&self.state, |i| {
            i.storage.clear();
            i.node_storage.clear();
        })
        .expect("clearing an injection");
    }

    /// Stops the driver through its shutdown future.
    pub fn stop(self) -> Result<(), ServiceError> {
        self.service.map_or(Ok(()), Service::stop)
    }

    /// Ends the driver's server as `kill -9` ends its process (see [`Service::kill`]): its
    /// sockets stay behind with nobody answering them, and the state dir stays for
    /// [`Driver::restart`], which clears the stale socket as a new process would.
    pub fn kill(&mut self) {
        if let Some(service) = self.service.take() {
            service.kill().expect("the driver's thread did not panic");
        }
    }
}

/// A CSI call's request, with the deadline every call of these tests has.
fn csi_request<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(CSI_TIMEOUT);
    request
}

/// Creates a volume through CreateVolume of the driver at `endpoint` (asking for
/// `required_bytes` when given) with a mount capability; returns its id.
pub async fn create_volume(endpoint: &str, name: &str, required_bytes: Option<i64>) -> String {
    let channel = volhealth_csi::client::connect(endpoint, CSI_TIMEOUT)
        .await
        .expect("connecting to the driver");
    let mut client = v1::controller_client::ControllerClient::new(channel);
    let req = csi_request(v1::CreateVolumeRequest {
        name: name.to_string(),
        capacity_range: required_bytes.map(|required_bytes| v1::CapacityRange {
            required_bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![mount_capability()],
        ..Default::default()
    });
    let resp = client
        .create_volume(req)
        .await
        .unwrap_or_else(|e| panic!("CreateVolume {name}: {e}"))
        .into_inner();
    resp.volume
        .unwrap_or_else(|| panic!("CreateVolume {name} answered without a volume"))
        .volume_id
}

/// Creates an object from its JSON.
pub async fn create<K>(api: &Api<K>, obj: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).expect("an object's JSON");
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {:?}: {e}", obj.meta().name))
}

/// Creates claim `claim` in `default` and PV `pv` for `volume_id` of `driver`, bound to each
/// other (as the PV controller leaves them). Returns the claim.
pub async fn bind_claim(
    client: &kube::Client,
    driver: &str,
    claim: &str,
    pv: &str,
    volume_id: &str,
) -> PersistentVolumeClaim {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let made = create(
        &pvcs,
        json!({"metadata": {"name": claim, "namespace": "default"},
               "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": pv,
                        "resources": {"requests": {"storage": "1Mi"}}}}),
    )
    .await;
    create(
        &pvs,
        json!({"metadata": {"name": pv},
               "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Mi"},
                        "volumeMode": "Filesystem",
                        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default",
                                     "name": claim, "uid": made.metadata.uid},
                        "csi": {"driver": driver, "volumeHandle": volume_id}}}),
    )
    .await;
    let params = PatchParams::default();
    pvs.patch_status(
        pv,
        &params,
        &Patch::Merge(json!({"status": {"phase": "Bound"}})),
    )
    .await
    .expect("marking the PV bound");
    pvcs.patch_status(
        claim,
        &params,
        &Patch::Merge(
            json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                                        "capacity": {"storage": "1Mi"}}}),
        ),
    )
    .await
    .expect("marking the claim bound")
}

/// Stages and publishes a volume on the driver's node service the way the kubelet does, with
/// the `vol_data.json` files it keeps in `stage_dir` (holding `globalmount`) and `publish_dir`
/// (holding `mount`).
pub async fn stage_and_publish(
    driver: &Driver,
    volume_id: &str,
    pv: &str,
    stage_dir: &Path,
    publish_dir: &Path,
) {
    stage_and_publish_via(
        &driver.endpoint,
        driver,
        volume_id,
        pv,
        stage_dir,
        publish_dir,
    )
    .await
}

/// [`stage_and_publish`] through `endpoint` (a proxy in front of the driver, say).
pub async fn stage_and_publish_via(
    endpoint: &str,
    driver: &Driver,
    volume_id: &str,
    pv: &str,
    stage_dir: &Path,
    publish_dir: &Path,
) {
    let channel = volhealth_csi::client::connect(endpoint, CSI_TIMEOUT)
        .await
        .expect("connecting to the driver");
    let mut client = v1::node_client::NodeClient::new(channel);
    let staging = stage_dir.join("globalmount");
    let target = publish_dir.join("mount");
    for (dir, data) in [
        (
            stage_dir,
            json!({"driverName": driver.name, "volumeHandle": volume_id, "specVolID": pv}),
        ),
        (
            publish_dir,
            json!({"driverName": driver.name, "volumeHandle": volume_id, "specVolID": pv,
                   "attachmentID": ""}),
        ),
    ] {
        std::fs::create_dir_all(dir).expect("creating a kubelet directory");
        std::fs::write(dir.join("vol_data.json"), data.to_string()).expect("writing vol_data.json");
    }
    client
        .node_stage_volume(csi_request(node_requests::stage(volume_id, &staging)))
        .await
        .expect("NodeStageVolume");
    client
        .node_publish_volume(csi_request(node_requests::publish(
            volume_id, &staging, &target,
        )))
        .await
        .expect("NodePublishVolume");
}
