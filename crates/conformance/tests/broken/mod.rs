//! A small in-memory CSI driver for the suite's own tests, served for real on a unix socket with
//! `volhealth_csi::server::spawn_unix`. Unbroken, it follows every rule the suite checks; each
//! [`Break`] makes it break exactly one.
//!
//! Besides the volumes the suite creates, it has two volumes of its own with conditions, so that
//! the entry rules and paging have something to look at without injection.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use tonic::transport::Server;
use tonic::{Request, Response, Status};
use volhealth_csi::capabilities::{controller_rpc, node_rpc};
use volhealth_csi::server::{Serving, SocketOptions, spawn_unix};
use volhealth_csi::v1;
use volhealth_csi::v1::controller_service_capability::rpc::Type as CtrlRpc;
use volhealth_csi::v1::node_service_capability::rpc::Type as NodeRpc;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;

/// The one rule a driver breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// Follows every rule.
    Nothing,
    /// Advertises LIST_VOLUME_HEALTH without GET_VOLUME_HEALTH.
    ListWithoutGet,
    /// ControllerGetVolumeHealth of an unknown volume answers INTERNAL.
    UnknownVolumeInternal,
    /// NodeGetVolumeHealth of an unknown volume answers OK with an empty report.
    NodeUnknownVolumeOk,
    /// ControllerGetVolumeHealth accepts an empty volume id.
    EmptyIdAccepted,
    /// A bad list token answers INVALID_ARGUMENT.
    BadTokenInvalidArgument,
    /// max_entries is ignored: everything in one page.
    MaxEntriesIgnored,
    /// next_token is never empty.
    EndlessTokens,
    /// A status value outside the enum.
    UnknownStatus,
    /// A reason in lowerCamelCase.
    LowercaseReason,
    /// A reason longer than 256 bytes.
    TooLongReason,
    /// A message longer than 1024 bytes.
    TooLongMessage,
    /// The same (status, reason) twice for one volume.
    DuplicateStatusReason,
    /// The same storage (status, reason, capability) twice.
    DuplicateStorageEntry,
    /// Error messages quote the request's secrets.
    SecretsEchoed,
    /// NodeGetVolumeHealth refuses a volume whose stage failed.
    RefuseStageAttempted,
    /// An injected condition is still reported after it was cleared.
    NeverClears,
}

/// Lines `SCOPE TARGET STATUS REASON` in this file are reported as conditions; the shell
/// command of [`Running::inject_cmd`] writes them, following the `--inject-cmd` contract.
const INJECTIONS: &str = "injections";

#[derive(Debug, Default)]
struct State {
    /// Volume id -> its conditions.
    volumes: BTreeMap<String, Vec<VolumeHealthEntry>>,
    /// Names given to CreateVolume -> id.
    names: HashMap<String, String>,
    /// Volumes whose last stage failed.
    failed_stage: Vec<String>,
    /// Injections ever seen (reported forever with [`Break::NeverClears`]).
    sticky: Vec<(String, String, i32, String)>,
    next: u64,
}

#[derive(Clone)]
struct Driver {
    brk: Break,
    state: Arc<Mutex<State>>,
    /// Leave healthy volumes out of ControllerListVolumeHealth (what drivers SHOULD do).
    omit_healthy: bool,
    inject_file: std::path::PathBuf,
}

fn entry(status: i32, reason: &str) -> VolumeHealthEntry {
    VolumeHealthEntry {
        status,
        reason: reason.into(),
        message: "reported by the test driver".into(),
    }
}

impl Driver {
    fn new(brk: Break, omit_healthy: bool, inject_file: std::path::PathBuf) -> Driver {
        let mut state = State::default();
        let mut first = vec![entry(1, "SlowIo")];
        if omit_healthy {
            // Nothing is listed until something is injected.
            first.clear();
        }
        match brk {
            Break::UnknownStatus => first.push(entry(7, "Mystery")),
            Break::LowercaseReason => first.push(entry(2, "volumeGone")),
            Break::TooLongReason => first.push(entry(2, &format!("A{}", "b".repeat(300)))),
            Break::DuplicateStatusReason => first.push(entry(1, "SlowIo")),
            Break::TooLongMessage => first.push(VolumeHealthEntry {
                message: "m".repeat(1025),
                ..entry(3, "BlocksLost")
            }),
            _ => {}
        }
        state.volumes.insert("own-a".into(), first);
        let second = if omit_healthy {
            Vec::new()
        } else {
            vec![entry(2, "VolumeNotFound")]
        };
        state.volumes.insert("own-b".into(), second);
        Driver {
            brk,
            state: Arc::new(Mutex::new(state)),
            omit_healthy,
            inject_file,
        }
    }

    /// Injected (target, status, reason) of one scope.
    fn injected(&self, scope: &str) -> Vec<(String, i32, String)> {
        let text = std::fs::read_to_string(&self.inject_file).unwrap_or_default();
        let mut now: Vec<(String, String, i32, String)> = text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let status = match (f.first().copied(), f.get(2).copied()?) {
                    (Some("storage"), "StorageDegraded") => 1,
                    (Some("storage"), "StorageUnreachable") => 2,
                    (_, "Degraded") => 1,
                    (_, "Inaccessible") => 2,
                    (_, "DataLoss") => 3,
                    _ => return None,
                };
                Some((
                    f[0].to_string(),
                    f[1].to_string(),
                    status,
                    f.get(3)?.to_string(),
                ))
            })
            .collect();
        if self.brk == Break::NeverClears {
            let mut st = self.lock();
            for i in &now {
                if !st.sticky.contains(i) {
                    st.sticky.push(i.clone());
                }
            }
            now = st.sticky.clone();
        }
        now.into_iter()
            .filter(|(sc, ..)| sc == scope)
            .map(|(_, t, st, r)| (t, st, r))
            .collect()
    }

    /// Injected volume entries of one scope for one volume.
    fn injected_for(&self, scope: &str, id: &str) -> Vec<VolumeHealthEntry> {
        self.injected(scope)
            .into_iter()
            .filter(|(t, ..)| t == id)
            .map(|(_, st, r)| entry(st, &r))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An error message, quoting secrets when that is the rule broken.
    fn error(&self, code: tonic::Code, msg: &str, secrets: &HashMap<String, String>) -> Status {
        if self.brk == Break::SecretsEchoed {
            Status::new(code, format!("{msg} (request secrets: {secrets:?})"))
        } else {
            Status::new(code, msg.to_string())
        }
    }

    fn health(&self, id: &str) -> Option<v1::VolumeHealth> {
        let base = self.lock().volumes.get(id).cloned()?;
        let mut health_statuses = base;
        health_statuses.extend(self.injected_for("controller", id));
        Some(v1::VolumeHealth {
            volume_id: id.to_string(),
            health_statuses,
        })
    }
}

#[tonic::async_trait]
impl v1::identity_server::Identity for Driver {
    async fn get_plugin_info(
        &self,
        _: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        Ok(Response::new(v1::GetPluginInfoResponse {
            name: "broken.test.volhealth.io".into(),
            vendor_version: format!("{:?}", self.brk),
            manifest: Default::default(),
        }))
    }
}

#[tonic::async_trait]
impl v1::controller_server::Controller for Driver {
    async fn controller_get_capabilities(
        &self,
        _: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        let mut caps = vec![CtrlRpc::CreateDeleteVolume, CtrlRpc::ListVolumeHealth];
        if self.brk != Break::ListWithoutGet {
            caps.push(CtrlRpc::GetVolumeHealth);
        }
        Ok(Response::new(v1::ControllerGetCapabilitiesResponse {
            capabilities: caps.into_iter().map(controller_rpc).collect(),
        }))
    }

    async fn create_volume(
        &self,
        req: Request<v1::CreateVolumeRequest>,
    ) -> Result<Response<v1::CreateVolumeResponse>, Status> {
        let req = req.into_inner();
        if req.name.is_empty() {
            return Err(Status::invalid_argument("name is required"));
        }
        let mut st = self.lock();
        let id = match st.names.get(&req.name) {
            Some(id) => id.clone(),
            None => {
                st.next += 1;
                let id = format!("vol-{:04}", st.next);
                st.names.insert(req.name.clone(), id.clone());
                st.volumes.insert(id.clone(), Vec::new());
                id
            }
        };
        Ok(Response::new(v1::CreateVolumeResponse {
            volume: Some(v1::Volume {
                capacity_bytes: 16 << 20,
                volume_id: id,
                ..Default::default()
            }),
        }))
    }

    async fn delete_volume(
        &self,
        req: Request<v1::DeleteVolumeRequest>,
    ) -> Result<Response<v1::DeleteVolumeResponse>, Status> {
        let id = req.into_inner().volume_id;
        let mut st = self.lock();
        st.volumes.remove(&id);
        st.names.retain(|_, v| *v != id);
        Ok(Response::new(v1::DeleteVolumeResponse {}))
    }

    async fn controller_get_volume_health(
        &self,
        req: Request<v1::ControllerGetVolumeHealthRequest>,
    ) -> Result<Response<v1::ControllerGetVolumeHealthResponse>, Status> {
        let req = req.into_inner();
        if req.volume_id.is_empty() && self.brk != Break::EmptyIdAccepted {
            return Err(self.error(
                tonic::Code::InvalidArgument,
                "volume_id is required",
                &req.secrets,
            ));
        }
        match self.health(&req.volume_id) {
            Some(vh) => Ok(Response::new(v1::ControllerGetVolumeHealthResponse {
                volume_health: Some(vh),
            })),
            None if req.volume_id.is_empty() => Ok(Response::new(
                v1::ControllerGetVolumeHealthResponse::default(),
            )),
            None => {
                let code = if self.brk == Break::UnknownVolumeInternal {
                    tonic::Code::Internal
                } else {
                    tonic::Code::NotFound
                };
                Err(self.error(code, "no such volume", &req.secrets))
            }
        }
    }

    async fn controller_list_volume_health(
        &self,
        req: Request<v1::ControllerListVolumeHealthRequest>,
    ) -> Result<Response<v1::ControllerListVolumeHealthResponse>, Status> {
        let req = req.into_inner();
        let ids: Vec<String> = self.lock().volumes.keys().cloned().collect();
        let all: Vec<v1::VolumeHealth> = ids
            .iter()
            .filter_map(|id| self.health(id))
            .filter(|vh| !(self.omit_healthy && vh.health_statuses.is_empty()))
            .collect();
        let start = if req.starting_token.is_empty() {
            0
        } else {
            match req
                .starting_token
                .strip_prefix('p')
                .and_then(|n| n.parse::<usize>().ok())
            {
                Some(n) => n,
                None => {
                    let code = if self.brk == Break::BadTokenInvalidArgument {
                        tonic::Code::InvalidArgument
                    } else {
                        tonic::Code::Aborted
                    };
                    return Err(self.error(
                        code,
                        "starting_token was not returned by this plugin",
                        &req.secrets,
                    ));
                }
            }
        };
        let max = match (req.max_entries, self.brk) {
            (_, Break::MaxEntriesIgnored) | (0, _) => usize::MAX,
            (n, _) => {
                usize::try_from(n).map_err(|_| Status::invalid_argument("max_entries < 0"))?
            }
        };
        let entries: Vec<_> = all.iter().skip(start).take(max).cloned().collect();
        let end = start + entries.len();
        let next_token = if end < all.len() || self.brk == Break::EndlessTokens {
            format!("p{end}")
        } else {
            String::new()
        };
        Ok(Response::new(v1::ControllerListVolumeHealthResponse {
            entries,
            next_token,
        }))
    }
}

#[tonic::async_trait]
impl v1::node_server::Node for Driver {
    async fn node_get_capabilities(
        &self,
        _: Request<v1::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<v1::NodeGetCapabilitiesResponse>, Status> {
        let capabilities = [
            NodeRpc::StageUnstageVolume,
            NodeRpc::GetVolumeHealth,
            NodeRpc::GetStorageHealth,
        ];
        Ok(Response::new(v1::NodeGetCapabilitiesResponse {
            capabilities: capabilities.into_iter().map(node_rpc).collect(),
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<v1::NodeGetInfoRequest>,
    ) -> Result<Response<v1::NodeGetInfoResponse>, Status> {
        Ok(Response::new(v1::NodeGetInfoResponse {
            node_id: "test-node".into(),
            ..Default::default()
        }))
    }

    async fn node_stage_volume(
        &self,
        req: Request<v1::NodeStageVolumeRequest>,
    ) -> Result<Response<v1::NodeStageVolumeResponse>, Status> {
        let req = req.into_inner();
        let path = Path::new(&req.staging_target_path);
        if !path.is_dir() {
            self.lock().failed_stage.push(req.volume_id.clone());
            return Err(Status::internal("staging_target_path is not a directory"));
        }
        Ok(Response::new(v1::NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        _: Request<v1::NodeUnstageVolumeRequest>,
    ) -> Result<Response<v1::NodeUnstageVolumeResponse>, Status> {
        Ok(Response::new(v1::NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        req: Request<v1::NodePublishVolumeRequest>,
    ) -> Result<Response<v1::NodePublishVolumeResponse>, Status> {
        std::fs::create_dir_all(&req.get_ref().target_path)
            .map_err(|e| Status::internal(format!("creating the target path: {e}")))?;
        Ok(Response::new(v1::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        let _ = std::fs::remove_dir(&req.get_ref().target_path);
        Ok(Response::new(v1::NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_health(
        &self,
        req: Request<v1::NodeGetVolumeHealthRequest>,
    ) -> Result<Response<v1::NodeGetVolumeHealthResponse>, Status> {
        let id = req.into_inner().volume_id;
        if id.is_empty() {
            return Err(Status::invalid_argument("volume_id is required"));
        }
        if self.brk == Break::RefuseStageAttempted && self.lock().failed_stage.contains(&id) {
            return Err(Status::failed_precondition("the volume is not staged"));
        }
        match self.health(&id) {
            // Node-side, the suite's volumes are healthy; the driver's own ones are not staged here.
            Some(vh) => Ok(Response::new(v1::NodeGetVolumeHealthResponse {
                volume_health: Some(v1::VolumeHealth {
                    health_statuses: self.injected_for("node", &vh.volume_id),
                    volume_id: vh.volume_id,
                }),
            })),
            None if self.brk == Break::NodeUnknownVolumeOk => {
                Ok(Response::new(v1::NodeGetVolumeHealthResponse::default()))
            }
            None => Err(Status::not_found("no such volume")),
        }
    }

    async fn node_get_storage_health(
        &self,
        req: Request<v1::NodeGetStorageHealthRequest>,
    ) -> Result<Response<v1::NodeGetStorageHealthResponse>, Status> {
        let _ = req;
        let one = v1::node_get_storage_health_response::StorageBackendHealth {
            status: 1,
            reason: "PoolNearlyFull".into(),
            message: "the pool is 95% full".into(),
            volume_capability: None,
        };
        let mut backend_health = vec![one.clone()];
        if self.brk == Break::DuplicateStorageEntry {
            backend_health.push(one);
        }
        for (target, status, reason) in self.injected("storage") {
            if target == "test-node" {
                backend_health.push(v1::node_get_storage_health_response::StorageBackendHealth {
                    status,
                    reason,
                    message: String::new(),
                    volume_capability: None,
                });
            }
        }
        Ok(Response::new(v1::NodeGetStorageHealthResponse {
            backend_health,
        }))
    }
}

/// A driver serving in the background until dropped.
pub struct Running {
    /// `unix:///…` of its socket.
    pub endpoint: String,
    /// An `--inject-cmd` for this driver.
    pub inject_cmd: String,
    _serving: Serving,
    _dir: tempfile::TempDir,
}

/// Starts a driver breaking `brk` on a fresh socket.
pub fn start(brk: Break) -> Running {
    start_with(brk, false)
}

/// Like [`start`]; with `omit_healthy`, healthy volumes are left out of listings and the
/// driver's own volumes are healthy, so only injections are ever listed.
pub fn start_with(brk: Break, omit_healthy: bool) -> Running {
    let dir = tempfile::tempdir().expect("tempdir");
    let endpoint = format!("unix://{}", dir.path().join("csi.sock").display());
    let file = dir.path().join(INJECTIONS);
    let f = file.display();
    let inject_cmd = format!(
        "f() {{ case \"$1\" in set) echo \"$2 $3 $4 $5\" >> '{f}';; clear) grep -v \"^$2 $3 \" '{f}' > '{f}.tmp'; mv '{f}.tmp' '{f}';; esac; }}; f"
    );
    let driver = Driver::new(brk, omit_healthy, file);
    let router = Server::builder()
        .add_service(v1::identity_server::IdentityServer::new(driver.clone()))
        .add_service(v1::controller_server::ControllerServer::new(driver.clone()))
        .add_service(v1::node_server::NodeServer::new(driver));
    let serving = spawn_unix(&endpoint, router, SocketOptions::default());
    Running {
        endpoint,
        inject_cmd,
        _serving: serving,
        _dir: dir,
    }
}
