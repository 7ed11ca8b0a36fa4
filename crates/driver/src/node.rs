//! The CSI Node service: stage (bind or loop mount), publish (bind mount), stats, and node-side
//! volume and storage health. Without mount privilege, staging and publishing make symlinks instead
//! (see [`crate::mounts`]).

use crate::attempts::{self, Attempts, PathAttempt};
use crate::condition::{merge, merge_storage};
use crate::config::BackendKind;
use crate::detect_node::NodeCheckInput;
use crate::injection::Side;
use crate::mounts::{self, MountMethod};
use crate::plugin::{HealthRpc, Plugin, internal, required, storage_entry, volume_health};
use crate::records::{self, VolumeRecord};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tonic::{Request, Response, Status};
use volhealth_csi::capabilities::node_rpc;
use volhealth_csi::v1;
use volhealth_csi::v1::node_service_capability::rpc::Type as RpcType;

/// Node service of one driver process.
pub struct NodeService {
    plugin: Arc<Plugin>,
}

impl NodeService {
    /// Serves the node side for `plugin`.
    pub fn new(plugin: Arc<Plugin>) -> Self {
        NodeService { plugin }
    }

    fn node_id(&self) -> &str {
        &self.plugin.config.node_id
    }

    /// Loads the volume record; an unknown volume is NOT_FOUND.
    fn record(&self, volume_id: &str) -> Result<VolumeRecord, Status> {
        records::load(&self.plugin.state, volume_id)
            .map_err(internal)?
            .ok_or_else(|| Status::not_found(format!("volume {volume_id} does not exist")))
    }

    /// Keeps `attempt` as the volume's attempt at `at` (None forgets it).
    fn remember(&self, volume_id: &str, at: At<'_>, attempt: Option<PathAttempt>) {
        if !records::is_valid_volume_id(volume_id) {
            return;
        }
        let change = |a: &mut Attempts| at.set(a, attempt);
        if let Err(e) = attempts::update(&self.plugin.state, self.node_id(), volume_id, change) {
            tracing::warn!(volume_id, error = %e, "could not record a stage or publish attempt");
        }
    }

    /// Keeps `status` as the failed attempt of `call`, with `source`, and returns it.
    fn refuse(&self, call: &Call<'_>, source: &str, status: Status) -> Status {
        let attempt = call.attempt(source, None, Some(status.message().to_string()));
        self.remember(call.id, call.at, Some(attempt));
        status
    }

    /// The record of the volume `call` attaches; a failure to load it is kept as the attempt.
    fn record_for(&self, call: &Call<'_>) -> Result<VolumeRecord, Status> {
        self.record(call.id)
            .map_err(|status| self.refuse(call, "", status))
    }

    /// Whether an earlier attempt of `call` succeeded and its path still shows what it attached.
    fn already_done(&self, call: &Call<'_>) -> bool {
        let existing = attempts::load(&self.plugin.state, self.node_id(), call.id)
            .ok()
            .flatten();
        Self::already_attached(
            existing.as_ref().and_then(|a| call.at.get(a)),
            call.at.path(),
        )
    }

    /// Attaches `source` at the path of `call` (see [`NodeService::attach`]) and keeps the
    /// outcome as its attempt: FAILED_PRECONDITION when `source` is missing, INTERNAL when
    /// attaching fails.
    async fn attach_kept(
        &self,
        call: &Call<'_>,
        source: &Path,
        image: bool,
    ) -> Result<MountMethod, Status> {
        let source_s = source.display().to_string();
        if std::fs::symlink_metadata(source).is_err() {
            let missing = Status::failed_precondition(call.at.missing_source(&source_s));
            return Err(self.refuse(call, &source_s, missing));
        }
        let target = Path::new(call.at.path());
        match self.attach(source, target, image, call.readonly).await {
            Ok(method) => {
                let attempt = call.attempt(&source_s, Some(method), None);
                self.remember(call.id, call.at, Some(attempt));
                Ok(method)
            }
            Err(e) => {
                let attempt = call.attempt(&source_s, None, Some(e.to_string()));
                self.remember(call.id, call.at, Some(attempt));
                Err(Status::internal(format!(
                    "{} {}: {e}",
                    call.at.doing(),
                    call.id
                )))
            }
        }
    }

    /// NodeUnstageVolume and NodeUnpublishVolume: detaches the path of `at` and forgets its
    /// attempt.
    async fn undo(&self, volume_id: &str, at: At<'_>) -> Result<(), Status> {
        at.given_with(volume_id)?;
        let _guard = self.plugin.ops.lock().await;
        self.detach(Path::new(at.path()), at.keeps_dir())
            .map_err(internal)?;
        self.remember(volume_id, at, None);
        Ok(())
    }

    /// Makes `target` show `source`: a bind or loop mount, or a symlink without privilege.
    async fn attach(
        &self,
        source: &Path,
        target: &Path,
        image: bool,
        readonly: bool,
    ) -> crate::Result<MountMethod> {
        if !self.plugin.can_mount {
            mounts::symlink(source, target)?;
            return Ok(MountMethod::Symlink);
        }
        std::fs::create_dir_all(target)
            .map_err(|e| crate::Error::io("creating mount point", target, e))?;
        if image {
            mounts::loop_mount(source, target).await?;
            Ok(MountMethod::Loop)
        } else {
            mounts::bind(source, target, readonly)?;
            Ok(MountMethod::Bind)
        }
    }

    /// Undoes [`NodeService::attach`]; `keep_dir` leaves an empty directory where the CO made one.
    fn detach(&self, path: &Path, keep_dir: bool) -> crate::Result<()> {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return Ok(());
        };
        if meta.file_type().is_symlink() {
            std::fs::remove_file(path)
                .map_err(|e| crate::Error::io("removing symlink", path, e))?;
            if keep_dir {
                std::fs::create_dir_all(path)
                    .map_err(|e| crate::Error::io("restoring directory", path, e))?;
            }
            return Ok(());
        }
        // Mounts may be stacked (a repeated publish); a bounded loop, in case the mount table
        // and umount(2) disagree about the path.
        for _ in 0..8 {
            if !mounts::is_mount_point(path) {
                break;
            }
            mounts::unmount(path)?;
        }
        if !keep_dir {
            let _ = std::fs::remove_dir(path);
        }
        Ok(())
    }

    fn already_attached(a: Option<&PathAttempt>, path: &str) -> bool {
        let Some(a) = a.filter(|a| a.ok() && a.path == path) else {
            return false;
        };
        match a.method {
            Some(MountMethod::Symlink) => {
                std::fs::read_link(path).ok().as_deref() == Some(Path::new(&a.source))
            }
            Some(_) => mounts::is_mount_point(Path::new(path)),
            None => false,
        }
    }
}

/// Where the node attaches a volume: its staging path, or one of its target paths. Each keeps its
/// own attempt.
#[derive(Debug, Clone, Copy)]
enum At<'a> {
    /// NodeStageVolume at this staging path.
    Stage(&'a str),
    /// NodePublishVolume at this target path.
    Publish(&'a str),
}

impl<'a> At<'a> {
    fn path(self) -> &'a str {
        match self {
            At::Stage(path) | At::Publish(path) => path,
        }
    }

    /// INVALID_ARGUMENT unless the request gives `volume_id` and the path (its field is
    /// `staging_target_path` or `target_path`).
    fn given_with(self, volume_id: &str) -> Result<(), Status> {
        required(volume_id, "volume_id")?;
        match self {
            At::Stage(path) => required(path, "staging_target_path"),
            At::Publish(path) => required(path, "target_path"),
        }
    }

    /// What attaching here is called in errors.
    fn doing(self) -> &'static str {
        match self {
            At::Stage(_) => "staging",
            At::Publish(_) => "publishing",
        }
    }

    /// The refusal when the source to attach is missing.
    fn missing_source(self, source: &str) -> String {
        match self {
            At::Stage(_) => format!("volume data {source} does not exist"),
            At::Publish(_) => format!("source {source} does not exist (not staged?)"),
        }
    }

    /// Whether detaching leaves the directory: the CO makes the staging path.
    fn keeps_dir(self) -> bool {
        matches!(self, At::Stage(_))
    }

    fn get(self, a: &Attempts) -> Option<&PathAttempt> {
        match self {
            At::Stage(_) => a.stage.as_ref(),
            At::Publish(target) => a.publishes.get(target),
        }
    }

    fn set(self, a: &mut Attempts, attempt: Option<PathAttempt>) {
        match (self, attempt) {
            (At::Stage(_), attempt) => a.stage = attempt,
            (At::Publish(target), Some(attempt)) => {
                a.publishes.insert(target.to_string(), attempt);
            }
            (At::Publish(target), None) => {
                a.publishes.remove(target);
            }
        }
    }
}

/// A NodeStageVolume or NodePublishVolume being answered.
struct Call<'a> {
    id: &'a str,
    at: At<'a>,
    readonly: bool,
}

impl<'a> Call<'a> {
    /// The call to attach volume `id` at `at`; INVALID_ARGUMENT unless the request gives the
    /// volume, the path and a `capability`.
    fn new(
        id: &'a str,
        at: At<'a>,
        readonly: bool,
        capability: &Option<v1::VolumeCapability>,
    ) -> Result<Self, Status> {
        at.given_with(id)?;
        if capability.is_none() {
            return Err(Status::invalid_argument("volume_capability is required"));
        }
        Ok(Call { id, at, readonly })
    }

    fn attempt(
        &self,
        source: &str,
        method: Option<MountMethod>,
        error: Option<String>,
    ) -> PathAttempt {
        PathAttempt {
            path: self.at.path().to_string(),
            source: source.into(),
            method,
            readonly: self.readonly,
            error,
        }
    }
}

#[tonic::async_trait]
impl v1::node_server::Node for NodeService {
    async fn node_stage_volume(
        &self,
        req: Request<v1::NodeStageVolumeRequest>,
    ) -> Result<Response<v1::NodeStageVolumeResponse>, Status> {
        self.plugin.fault("NodeStageVolume").await?;
        let req = req.into_inner();
        let (id, staging) = (req.volume_id.as_str(), req.staging_target_path.as_str());
        let call = Call::new(id, At::Stage(staging), false, &req.volume_capability)?;
        let rec = self.record_for(&call)?;
        let _guard = self.plugin.ops.lock().await;
        if self.already_done(&call) {
            return Ok(Response::new(v1::NodeStageVolumeResponse {}));
        }
        let image = rec.backend == BackendKind::Image;
        let source: PathBuf = if image && !self.plugin.can_mount {
            let dir = self.plugin.state.fallback_dir(self.node_id(), id);
            if let Err(e) = std::fs::create_dir_all(&dir) {
                let shown = dir.display().to_string();
                let status = Status::internal(format!("creating {shown}: {e}"));
                return Err(self.refuse(&call, &shown, status));
            }
            dir
        } else {
            rec.data_path(&self.plugin.state)
        };
        let method = self
            .attach_kept(&call, &source, image && self.plugin.can_mount)
            .await?;
        tracing::info!(volume_id = %id, staging = %staging, ?method, "staged volume");
        Ok(Response::new(v1::NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        req: Request<v1::NodeUnstageVolumeRequest>,
    ) -> Result<Response<v1::NodeUnstageVolumeResponse>, Status> {
        self.plugin.fault("NodeUnstageVolume").await?;
        let req = req.into_inner();
        self.undo(&req.volume_id, At::Stage(&req.staging_target_path))
            .await?;
        Ok(Response::new(v1::NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        req: Request<v1::NodePublishVolumeRequest>,
    ) -> Result<Response<v1::NodePublishVolumeResponse>, Status> {
        self.plugin.fault("NodePublishVolume").await?;
        let req = req.into_inner();
        let (id, target) = (req.volume_id.as_str(), req.target_path.as_str());
        let call = Call::new(
            id,
            At::Publish(target),
            req.readonly,
            &req.volume_capability,
        )?;
        let rec = self.record_for(&call)?;
        let source = if !req.staging_target_path.is_empty() {
            PathBuf::from(&req.staging_target_path)
        } else if rec.backend == BackendKind::Dir {
            rec.data_path(&self.plugin.state)
        } else {
            return Err(Status::failed_precondition(
                "image volumes must be staged before they are published",
            ));
        };
        let _guard = self.plugin.ops.lock().await;
        if self.already_done(&call) {
            return Ok(Response::new(v1::NodePublishVolumeResponse {}));
        }
        let method = self.attach_kept(&call, &source, false).await?;
        tracing::info!(volume_id = %id, target = %target, ?method, "published volume");
        Ok(Response::new(v1::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        self.plugin.fault("NodeUnpublishVolume").await?;
        let req = req.into_inner();
        self.undo(&req.volume_id, At::Publish(&req.target_path))
            .await?;
        Ok(Response::new(v1::NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        req: Request<v1::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<v1::NodeGetVolumeStatsResponse>, Status> {
        self.plugin.fault("NodeGetVolumeStats").await?;
        let req = req.into_inner();
        required(&req.volume_id, "volume_id")?;
        required(&req.volume_path, "volume_path")?;
        let path = PathBuf::from(&req.volume_path);
        let stats = tokio::time::timeout(
            self.plugin.config.io_probe_timeout,
            tokio::task::spawn_blocking(move || nix::sys::statvfs::statvfs(&path)),
        )
        .await
        .map_err(|_| {
            Status::unavailable(format!(
                "statvfs of {} did not return in time",
                req.volume_path
            ))
        })?
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|e| Status::not_found(format!("volume path {}: {e}", req.volume_path)))?;
        let frag = stats.fragment_size() as i64;
        let total = stats.blocks() as i64 * frag;
        let available = stats.blocks_available() as i64 * frag;
        let used = total - stats.blocks_free() as i64 * frag;
        let inodes = stats.files() as i64;
        let inodes_free = stats.files_free() as i64;
        let usage = vec![
            v1::VolumeUsage {
                available,
                total,
                used,
                unit: v1::volume_usage::Unit::Bytes as i32,
            },
            v1::VolumeUsage {
                available: inodes_free,
                total: inodes,
                used: inodes - inodes_free,
                unit: v1::volume_usage::Unit::Inodes as i32,
            },
        ];
        Ok(Response::new(v1::NodeGetVolumeStatsResponse { usage }))
    }

    async fn node_get_volume_health(
        &self,
        req: Request<v1::NodeGetVolumeHealthRequest>,
    ) -> Result<Response<v1::NodeGetVolumeHealthResponse>, Status> {
        self.plugin.health_rpc(HealthRpc::NodeVolume).await?;
        let req = req.into_inner();
        required(&req.volume_id, "volume_id")?;
        let conditions = self
            .volume_conditions(
                &req.volume_id,
                req.volume_publish_path,
                req.staging_target_path,
            )
            .await?;
        Ok(Response::new(v1::NodeGetVolumeHealthResponse {
            volume_health: Some(volume_health(&req.volume_id, &conditions)),
        }))
    }

    async fn node_get_storage_health(
        &self,
        _req: Request<v1::NodeGetStorageHealthRequest>,
    ) -> Result<Response<v1::NodeGetStorageHealthResponse>, Status> {
        self.plugin.health_rpc(HealthRpc::NodeStorage).await?;
        let root = self.plugin.state.root().to_path_buf();
        let low = self.plugin.config.low_space_fraction;
        let probe = format!(".volhealth-storage-probe-{}", self.node_id());
        let deadline = self.plugin.config.io_probe_timeout;
        let shown = root.display().to_string();
        let detected = match tokio::time::timeout(
            deadline,
            tokio::task::spawn_blocking(move || {
                crate::detect_storage::storage_conditions(&root, low, &probe)
            }),
        )
        .await
        {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(Status::internal(format!("storage check failed: {e}"))),
            Err(_) => vec![crate::condition::StorageCondition {
                status: crate::condition::storage_status::STORAGE_UNREACHABLE,
                reason: "StateDirTimedOut".into(),
                message: format!(
                    "checking {shown} took longer than {} ms",
                    deadline.as_millis()
                ),
                access_mode: None,
                volume_mode: None,
            }],
        };
        let injected = self.plugin.injections.current().storage_for(self.node_id());
        let merged = merge_storage(detected, injected);
        Ok(Response::new(v1::NodeGetStorageHealthResponse {
            backend_health: merged.iter().map(storage_entry).collect(),
        }))
    }

    async fn node_get_capabilities(
        &self,
        _req: Request<v1::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<v1::NodeGetCapabilitiesResponse>, Status> {
        self.plugin.fault("NodeGetCapabilities").await?;
        let mut caps = vec![
            node_rpc(RpcType::StageUnstageVolume),
            node_rpc(RpcType::GetVolumeStats),
        ];
        if self.plugin.config.health.node_volume {
            caps.push(node_rpc(RpcType::GetVolumeHealth));
        }
        if self.plugin.config.health.node_storage {
            caps.push(node_rpc(RpcType::GetStorageHealth));
        }
        if self.plugin.config.legacy_condition {
            caps.push(node_rpc(
                volhealth_legacy_bridge::wire::NODE_VOLUME_CONDITION,
            ));
        }
        Ok(Response::new(v1::NodeGetCapabilitiesResponse {
            capabilities: caps,
        }))
    }

    async fn node_get_info(
        &self,
        _req: Request<v1::NodeGetInfoRequest>,
    ) -> Result<Response<v1::NodeGetInfoResponse>, Status> {
        self.plugin.fault("NodeGetInfo").await?;
        Ok(Response::new(v1::NodeGetInfoResponse {
            node_id: self.node_id().to_string(),
            max_volumes_per_node: 0,
            accessible_topology: None,
        }))
    }
}

impl NodeService {
    /// What the node sees wrong with volume `id` at these paths (detected and injected); NOT_FOUND
    /// when the node knows nothing of it. NodeGetVolumeHealth answers with it, and so does the
    /// legacy NodeGetVolumeStats.
    pub(crate) async fn volume_conditions(
        &self,
        id: &str,
        publish_path: String,
        staging_path: String,
    ) -> Result<Vec<crate::condition::Condition>, Status> {
        let id = id.to_string();
        let injected: Vec<_> = self
            .plugin
            .injections
            .current()
            .volume_conditions(&id, Side::Node)
            .collect();
        // The records live in the state dir, which may hang like any storage: read them off
        // the async threads and under the same deadline as the probe.
        let (state, node, vid) = (
            self.plugin.state.clone(),
            self.node_id().to_string(),
            id.clone(),
        );
        let deadline = self.plugin.config.io_probe_timeout;
        let read = tokio::task::spawn_blocking(move || {
            Ok::<_, crate::Error>((
                records::load(&state, &vid)?,
                attempts::load(&state, &node, &vid)?,
            ))
        });
        let (rec, att) = match tokio::time::timeout(deadline, read).await {
            Ok(Ok(loaded)) => loaded.map_err(internal)?,
            Ok(Err(e)) => return Err(Status::internal(format!("reading records of {id}: {e}"))),
            Err(_) => {
                let c = crate::condition::Condition::new(
                    crate::condition::volume_status::INACCESSIBLE,
                    "IoProbeTimedOut",
                    format!(
                        "reading the driver's records in {} took longer than {} ms",
                        self.plugin.state.root().display(),
                        deadline.as_millis()
                    ),
                );
                return Ok(merge(vec![c], injected));
            }
        };
        if rec.is_none() && att.is_none() && injected.is_empty() {
            return Err(Status::not_found(format!(
                "volume {id} is unknown on node {}",
                self.node_id()
            )));
        }
        let input = NodeCheckInput {
            volume_id: id.clone(),
            attempts: att,
            data_path: rec.as_ref().map(|r| r.data_path(&self.plugin.state)),
            publish_path,
            staging_path,
            probe_name: format!(".volhealth-io-probe-{}", self.node_id()),
        };
        let detected = self.plugin.node_checker.check(input).await;
        Ok(merge(detected, injected))
    }
}
