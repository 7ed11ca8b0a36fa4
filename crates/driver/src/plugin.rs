//! State shared by the gRPC services of one driver process, and the conversions from the
//! driver's conditions to CSI messages.

use crate::condition::{Condition, StorageCondition, VolumeMode};
use crate::config::{DriverConfig, HealthCapabilities};
use crate::detect_node::NodeChecker;
use crate::fault;
use crate::injection_watch::InjectionWatch;
use crate::state::StateDir;
use crate::volume_view::{Entry, VolumeView};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use tonic::Status;
use volhealth_csi::v1;

/// Everything the services share.
pub struct Plugin {
    /// The process's configuration.
    pub config: DriverConfig,
    /// The state dir.
    pub state: StateDir,
    /// Injections, re-read when they change.
    pub injections: InjectionWatch,
    /// The controller's view (None when the controller is not served).
    pub view: Option<Arc<VolumeView>>,
    /// Node checks under a deadline.
    pub node_checker: NodeChecker,
    /// Whether real mounts are possible (decided once at start).
    pub can_mount: bool,
    /// Serialises volume creation, deletion, staging and publishing (rare, and not on health paths).
    pub ops: tokio::sync::Mutex<()>,
    /// Number of ControllerListVolumeHealth cycles started (drives rotating omissions).
    pub list_cycles: AtomicU64,
}

impl Plugin {
    /// Applies an injected fault of `method`: waits the delay, then fails when the dice say so.
    pub async fn fault(&self, method: &str) -> Result<(), Status> {
        let Some(decision) = fault::decide(&self.injections, method, rand::random::<f64>()) else {
            return Ok(());
        };
        if !decision.delay.is_zero() {
            tokio::time::sleep(decision.delay).await;
        }
        match decision.fail_code {
            Some(code) => Err(Status::new(
                tonic::Code::from_i32(code),
                decision
                    .message
                    .unwrap_or_else(|| format!("injected fault for {method}")),
            )),
            None => Ok(()),
        }
    }

    /// The start of a health RPC: UNIMPLEMENTED when the driver does not advertise it, else its
    /// injected fault (see [`Plugin::fault`]).
    pub async fn health_rpc(&self, rpc: HealthRpc) -> Result<(), Status> {
        if !rpc.advertised(&self.config.health) {
            return Err(Status::unimplemented(rpc.refusal()));
        }
        self.fault(rpc.method()).await
    }

    /// The controller view, or UNIMPLEMENTED when this process does not serve the controller.
    pub fn view(&self) -> Result<&Arc<VolumeView>, Status> {
        self.view.as_ref().ok_or_else(|| {
            Status::unimplemented("the controller service is not served by this process")
        })
    }

    /// The controller's entry of volume `id`: NOT_FOUND when there is none, UNIMPLEMENTED when
    /// this process does not serve the controller.
    pub fn volume(&self, id: &str) -> Result<Entry, Status> {
        self.view()?
            .get(id)
            .ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))
    }
}

/// INVALID_ARGUMENT "`name` is required" when the request field `name` holds `value` and it is
/// empty.
pub fn required(value: &str, name: &str) -> Result<(), Status> {
    if value.is_empty() {
        Err(Status::invalid_argument(format!("{name} is required")))
    } else {
        Ok(())
    }
}

/// A health RPC, which the driver may leave unadvertised (see [`HealthCapabilities`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthRpc {
    /// ControllerListVolumeHealth.
    ControllerList,
    /// ControllerGetVolumeHealth.
    ControllerGet,
    /// NodeGetVolumeHealth.
    NodeVolume,
    /// NodeGetStorageHealth.
    NodeStorage,
}

impl HealthRpc {
    /// The gRPC method name, as faults are injected for it.
    pub fn method(self) -> &'static str {
        match self {
            HealthRpc::ControllerList => "ControllerListVolumeHealth",
            HealthRpc::ControllerGet => "ControllerGetVolumeHealth",
            HealthRpc::NodeVolume => "NodeGetVolumeHealth",
            HealthRpc::NodeStorage => "NodeGetStorageHealth",
        }
    }

    /// Whether `health` advertises the RPC.
    pub fn advertised(self, health: &HealthCapabilities) -> bool {
        match self {
            HealthRpc::ControllerList => health.list,
            HealthRpc::ControllerGet => health.get,
            HealthRpc::NodeVolume => health.node_volume,
            HealthRpc::NodeStorage => health.node_storage,
        }
    }

    /// The UNIMPLEMENTED message when it is not advertised.
    fn refusal(self) -> &'static str {
        match self {
            HealthRpc::ControllerList => "LIST_VOLUME_HEALTH is not advertised by this driver",
            HealthRpc::ControllerGet => "GET_VOLUME_HEALTH is not advertised by this driver",
            HealthRpc::NodeVolume => "node GET_VOLUME_HEALTH is not advertised by this driver",
            HealthRpc::NodeStorage => "GET_STORAGE_HEALTH is not advertised by this driver",
        }
    }
}

/// A driver condition as a CSI volume health entry.
pub fn volume_entry(c: &Condition) -> v1::volume_health::VolumeHealthEntry {
    v1::volume_health::VolumeHealthEntry {
        status: c.status,
        reason: c.reason.clone(),
        message: c.message.clone(),
    }
}

/// A volume's conditions as a CSI `VolumeHealth`.
pub fn volume_health(volume_id: &str, conditions: &[Condition]) -> v1::VolumeHealth {
    v1::VolumeHealth {
        volume_id: volume_id.to_string(),
        health_statuses: conditions.iter().map(volume_entry).collect(),
    }
}

/// A driver storage condition as a CSI `StorageBackendHealth`.
pub fn storage_entry(
    c: &StorageCondition,
) -> v1::node_get_storage_health_response::StorageBackendHealth {
    let volume_capability =
        (c.access_mode.is_some() || c.volume_mode.is_some()).then(|| v1::VolumeCapability {
            access_type: c.volume_mode.map(|m| match m {
                VolumeMode::Filesystem => {
                    v1::volume_capability::AccessType::Mount(Default::default())
                }
                VolumeMode::Block => v1::volume_capability::AccessType::Block(Default::default()),
            }),
            access_mode: c
                .access_mode
                .map(|mode| v1::volume_capability::AccessMode { mode }),
        });
    v1::node_get_storage_health_response::StorageBackendHealth {
        status: c.status,
        reason: c.reason.clone(),
        message: c.message.clone(),
        volume_capability,
    }
}

/// Maps a library error to a gRPC status (INTERNAL, with what was being done).
pub fn internal(e: crate::Error) -> Status {
    match e {
        crate::Error::Invalid(m) => Status::invalid_argument(m),
        other => Status::internal(other.to_string()),
    }
}
