//! The monitor in this process, against the embedded API server and the reference driver over
//! real HTTP and a real unix socket: a volume's fault reaches its claim's status with a Warning
//! Event, its recovery clears it with a Normal Event, and `run` returns once its shutdown future
//! completes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::Api;
use std::time::Duration;
use volhealth_driver::condition::volume_status;
use volhealth_driver::injection::Side;
use volhealth_monitor::MonitorConfig;
use volhealth_testkit::{
    ApiServer, Claims, Driver, Service, bind_claim, client_for, run_monitor, wait_for,
};
use volhealth_writer::events::{REASON_VOLUME_DEGRADED, REASON_VOLUME_RECOVERED};

const DRIVER: &str = "hostpath.volhealth.io";
/// The admin first (its token goes into the server's kubeconfig), then the monitor's service
/// account, which is not an administrator.
const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
    monitortok,system:serviceaccount:kube-system:csi-external-health-monitor,2,\"system:serviceaccounts\"\n";
const WAIT: Duration = Duration::from_secs(30);

/// The claims in `default`, as `admin` sees them.
fn claims(admin: &kube::Client) -> Claims {
    Claims {
        admin: admin.clone(),
        driver: DRIVER.to_string(),
        endpoint: String::new(),
        namespace: "default".to_string(),
        timeout: WAIT,
    }
}

/// The API server, the driver, claim `claim-a` bound to PV `pv-a` of a real volume, and the
/// monitor running in-process as its service account, at a 1 s interval, serving its metrics.
struct World {
    _dir: tempfile::TempDir,
    api: ApiServer,
    driver: Driver,
    admin: kube::Client,
    /// The claims in `default`, as the admin sees them.
    claims: Claims,
    volume: String,
    monitor: Service,
    /// The monitor's `/metrics` URL.
    metrics: String,
}

impl World {
    /// Makes the driver report `status` for the volume, with `reason`.
    fn inject(&self, status: i32, reason: &str) {
        self.driver
            .inject_volume(&self.volume, Side::Controller, status, reason);
    }

    /// Waits until the monitor's metrics count a successful health call: its first cycle ran.
    async fn first_cycle_done(&self) {
        let url = self.metrics.clone();
        wait_for(WAIT, "the monitor's first cycle in its metrics", || async {
            let text = reqwest::get(&url).await.ok()?.text().await.ok()?;
            text.lines()
                .any(|l| {
                    l.starts_with("csi_volume_health_probe_total{")
                        && l.contains(r#"result="success""#)
                })
                .then_some(())
        })
        .await;
    }

    /// Stops the monitor, the driver and the API server, each of which must end cleanly.
    fn stop(self) {
        self.monitor
            .stop()
            .expect("the monitor returns Ok once its shutdown future completes");
        self.driver.stop().expect("the driver stops cleanly");
        self.api.stop().expect("the API server stops cleanly");
    }
}

/// A loopback address no one listens on now.
fn free_address() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("the bound address")
}

async fn world() -> World {
    world_at(Duration::from_secs(1), None).await
}

/// The world with the monitor's `--monitor-interval` at `interval`, and the driver's CSIDriver
/// annotated with `annotation` (its `volhealth.io/monitor-interval`) when given.
async fn world_at(interval: Duration, annotation: Option<&str>) -> World {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("api")).unwrap();
    std::fs::create_dir_all(dir.path().join("driver")).unwrap();
    let api = ApiServer::start(&dir.path().join("api"), Some(TOKENS)).await;
    let driver = Driver::start(&dir.path().join("driver"), DRIVER, "node-a").await;
    let admin = client_for(&api.kubeconfig).await;
    let volume = driver.create_volume("pv-a").await;
    bind_claim(&admin, DRIVER, "claim-a", "pv-a", &volume).await;
    if let Some(value) = annotation {
        let csidriver: k8s_openapi::api::storage::v1::CSIDriver =
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": DRIVER,
                    "annotations": {
                        volhealth_writer::intervals::MONITOR_ANNOTATION: value,
                    },
                },
                "spec": {},
            }))
            .unwrap();
        Api::all(admin.clone())
            .create(&kube::api::PostParams::default(), &csidriver)
            .await
            .expect("create the CSIDriver");
    }
    let address = free_address();
    let config = MonitorConfig {
        csi_address: driver.endpoint.clone(),
        kubeconfig: Some(api.token_kubeconfig(dir.path(), "monitor", "monitortok")),
        monitor_interval: interval,
        timeout: Duration::from_secs(5),
        http_endpoint: Some(address),
        ..MonitorConfig::default()
    };
    let monitor = run_monitor("monitor", config);
    World {
        _dir: dir,
        api,
        driver,
        claims: claims(&admin),
        admin,
        volume,
        monitor,
        metrics: format!("http://{address}/metrics"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_reaches_the_claim_and_its_recovery_clears_it() {
    let w = world().await;
    w.inject(volume_status::DEGRADED, "SlowDisk");
    w.claims
        .wait_conditions("claim-a", &[("Degraded", "SlowDisk")])
        .await;
    w.claims.wait_event("claim-a", REASON_VOLUME_DEGRADED).await;
    assert!(
        !w.monitor.ended(),
        "the monitor keeps running while nothing asks it to stop"
    );

    w.driver.clear_volume(&w.volume);
    w.claims.wait_conditions("claim-a", &[]).await;
    w.claims
        .wait_event("claim-a", REASON_VOLUME_RECOVERED)
        .await;

    w.stop();
}

/// The driver's CSIDriver sets the interval: with the flag at an hour, a fault still reaches
/// the claim within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_csidrivers_interval_annotation_overrides_the_flag() {
    let w = world_at(Duration::from_secs(3600), Some("1s")).await;
    // Past the first cycle, which runs at start whatever the interval.
    w.first_cycle_done().await;
    w.inject(volume_status::INACCESSIBLE, "DiskFailure");
    w.claims
        .wait_conditions("claim-a", &[("Inaccessible", "DiskFailure")])
        .await;
    w.stop();
}

/// Merges `status` into the status of object `name`, as a controller would.
async fn merge_status<K>(api: &Api<K>, name: &str, status: serde_json::Value)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = kube::api::Patch::Merge(serde_json::json!({ "status": status }));
    api.patch_status(name, &kube::api::PatchParams::default(), &patch)
        .await
        .unwrap();
}

/// external-health-monitor #188: a PV whose claim is deleted and that is then bound to a new
/// claim must be monitored again, for the new claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_rebound_to_a_new_claim_is_monitored_for_that_claim() {
    use k8s_openapi::api::core::v1::PersistentVolume;
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
    use serde_json::json;

    let w = world().await;
    let admin = w.admin.clone();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), "default");
    w.inject(volume_status::DEGRADED, "SlowDisk");
    let want = [("Degraded", "SlowDisk")];
    w.claims.wait_conditions("claim-a", &want).await;

    // The claim goes; the PV is released, then bound to a new claim, as the PV controller does.
    pvcs.delete("claim-a", &DeleteParams::default())
        .await
        .unwrap();
    let pvs: Api<PersistentVolume> = Api::all(admin.clone());
    merge_status(&pvs, "pv-a", json!({"phase": "Released"})).await;
    let claim_b: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "claim-b", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-a",
                 "resources": {"requests": {"storage": "1Mi"}}}}))
    .unwrap();
    let claim_b = pvcs.create(&PostParams::default(), &claim_b).await.unwrap();
    pvs.patch(
        "pv-a",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"claimRef": {"kind": "PersistentVolumeClaim",
            "namespace": "default", "name": "claim-b", "uid": claim_b.metadata.uid}}}),
        ),
    )
    .await
    .unwrap();
    merge_status(&pvs, "pv-a", json!({"phase": "Bound"})).await;
    merge_status(
        &pvcs,
        "claim-b",
        json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Mi"}}),
    )
    .await;
    w.claims.wait_conditions("claim-b", &want).await;
    // And it is followed there: the recovery clears the new claim.
    w.driver.clear_volume(&w.volume);
    w.claims.wait_conditions("claim-b", &[]).await;

    w.stop();
}
