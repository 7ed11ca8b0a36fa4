//! The CSI Node service: stage (bind or loop mount), publish (bind mount), stats, and node-side
//! volume and storage health. Without mount privilege, staging and publishing make symlinks instead
//! (see [`crate::mounts`]).

use crate::attempts::{self, PathAttempt};
use crate::condition::{merge, merge_storage};
use crate::config::BackendKind;
use crate::detect_node::NodeCheckInput;
use crate::injection::Side;
use crate::mounts::{self, MountMethod};
use crate::plugin::{Plugin, internal, storage_entry, volume_health};
use crate::records::{self, VolumeRecord};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tonic::{Request, Response, Status};
use volhealth_csi::v1;
use volhealth_csi::v1::node_service_capability::{Rpc, Type as CapType, rpc::Type as RpcType};

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

    fn remember(&self, volume_id: &str, change: impl FnOnce(&mut attempts::Attempts)) {
        if !records::is_valid_volume_id(volume_id) {
            return;
        }
        if let Err(e) = attempts::update(&self.plugin.state, self.node_id(), volume_id, change) {
            tracing::warn!(volume_id, error = %e, "could not record a stage or publish attempt");
        }
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

fn capability(t: RpcType) -> v1::NodeServiceCapability {
    v1::NodeServiceCapability {
        r#type: Some(CapType::Rpc(Rpc { r#type: t as i32 })),
    }
}

fn required(value: &str, name: &str) -> Result<(), Status> {
    if value.is_empty() {
        Err(Status::invalid_argument(format!("{name} is required")))
    } else {
        Ok(())
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
        required(&req.volume_id, "volume_id")?;
        required(&req.staging_target_path, "staging_target_path")?;
        if req.volume_capability.is_none() {
            return Err(Status::invalid_argument("volume_capability is required"));
        }
        let id = req.volume_id.clone();
        let staging = req.staging_target_path.clone();
        let fail = |source: &str, err: String| PathAttempt {
            path: staging.clone(),
            source: source.into(),
            method: None,
            readonly: false,
            error: Some(err),
        };
        let rec = match self.record(&id) {
            Ok(r) => r,
            Err(status) => {
                self.remember(&id, |a| {
                    a.stage = Some(fail("", status.message().to_string()))
                });
                return Err(status);
            }
        };
        let _guard = self.plugin.ops.lock().await;
        let existing = attempts::load(&self.plugin.state, self.node_id(), &id)
            .ok()
            .flatten();
        if Self::already_attached(existing.as_ref().and_then(|a| a.stage.as_ref()), &staging) {
            return Ok(Response::new(v1::NodeStageVolumeResponse {}));
        }
        let image = rec.backend == BackendKind::Image;
        let source: PathBuf = if image && !self.plugin.can_mount {
            let dir = self.plugin.state.fallback_dir(self.node_id(), &id);
            if let Err(e) = std::fs::create_dir_all(&dir) {
                let msg = format!("creating {}: {e}", dir.display());
                self.remember(&id, |a| {
                    a.stage = Some(fail(&dir.display().to_string(), msg.clone()))
                });
                return Err(Status::internal(msg));
            }
            dir
        } else {
            rec.data_path(&self.plugin.state)
        };
        let source_s = source.display().to_string();
        if std::fs::symlink_metadata(&source).is_err() {
            let msg = format!("volume data {source_s} does not exist");
            self.remember(&id, |a| a.stage = Some(fail(&source_s, msg.clone())));
            return Err(Status::failed_precondition(msg));
        }
        match self
            .attach(
                &source,
                Path::new(&staging),
                image && self.plugin.can_mount,
                false,
            )
            .await
        {
            Ok(method) => {
                self.remember(&id, |a| {
                    a.stage = Some(PathAttempt {
                        path: staging.clone(),
                        source: source_s.clone(),
                        method: Some(method),
                        readonly: false,
                        error: None,
                    })
                });
                tracing::info!(volume_id = %id, staging = %staging, ?method, "staged volume");
                Ok(Response::new(v1::NodeStageVolumeResponse {}))
            }
            Err(e) => {
                self.remember(&id, |a| a.stage = Some(fail(&source_s, e.to_string())));
                Err(Status::internal(format!("staging {id}: {e}")))
            }
        }
    }

    async fn node_unstage_volume(
        &self,
        req: Request<v1::NodeUnstageVolumeRequest>,
    ) -> Result<Response<v1::NodeUnstageVolumeResponse>, Status> {
        self.plugin.fault("NodeUnstageVolume").await?;
        let req = req.into_inner();
        required(&req.volume_id, "volume_id")?;
        required(&req.staging_target_path, "staging_target_path")?;
        let _guard = self.plugin.ops.lock().await;
        self.detach(Path::new(&req.staging_target_path), true)
            .map_err(internal)?;
        self.remember(&req.volume_id, |a| a.stage = None);
        Ok(Response::new(v1::NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        req: Request<v1::NodePublishVolumeRequest>,
    ) -> Result<Response<v1::NodePublishVolumeResponse>, Status> {
        self.plugin.fault("NodePublishVolume").await?;
        let req = req.into_inner();
        required(&req.volume_id, "volume_id")?;
        required(&req.target_path, "target_path")?;
        if req.volume_capability.is_none() {
            return Err(Status::invalid_argument("volume_capability is required"));
        }
        let id = req.volume_id.clone();
        let target = req.target_path.clone();
        let readonly = req.readonly;
        let fail = |source: &str, err: String| PathAttempt {
            path: target.clone(),
            source: source.into(),
            method: None,
            readonly,
            error: Some(err),
        };
        let rec = match self.record(&id) {
            Ok(r) => r,
            Err(status) => {
                self.remember(&id, |a| {
                    a.publishes
                        .insert(target.clone(), fail("", status.message().to_string()));
                });
                return Err(status);
            }
        };
        let source = if !req.staging_target_path.is_empty() {
            PathBuf::from(&req.staging_target_path)
        } else if rec.backend == BackendKind::Dir {
            rec.data_path(&self.plugin.state)
        } else {
            return Err(Status::failed_precondition(
                "image volumes must be staged before they are published",
            ));
        };
        let source_s = source.display().to_string();
        let _guard = self.plugin.ops.lock().await;
        let existing = attempts::load(&self.plugin.state, self.node_id(), &id)
            .ok()
            .flatten();
        if Self::already_attached(
            existing.as_ref().and_then(|a| a.publishes.get(&target)),
            &target,
        ) {
            return Ok(Response::new(v1::NodePublishVolumeResponse {}));
        }
        if std::fs::symlink_metadata(&source).is_err() {
            let msg = format!("source {source_s} does not exist (not staged?)");
            self.remember(&id, |a| {
                a.publishes
                    .insert(target.clone(), fail(&source_s, msg.clone()));
            });
            return Err(Status::failed_precondition(msg));
        }
        match self
            .attach(&source, Path::new(&target), false, readonly)
            .await
        {
            Ok(method) => {
                self.remember(&id, |a| {
                    a.publishes.insert(
                        target.clone(),
                        PathAttempt {
                            path: target.clone(),
                            source: source_s.clone(),
                            method: Some(method),
                            readonly,
                            error: None,
                        },
                    );
                });
                tracing::info!(volume_id = %id, target = %target, ?method, "published volume");
                Ok(Response::new(v1::NodePublishVolumeResponse {}))
            }
            Err(e) => {
                self.remember(&id, |a| {
                    a.publishes
                        .insert(target.clone(), fail(&source_s, e.to_string()));
                });
                Err(Status::internal(format!("publishing {id}: {e}")))
            }
        }
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        self.plugin.fault("NodeUnpublishVolume").await?;
        let req = req.into_inner();
        required(&req.volume_id, "volume_id")?;
        required(&req.target_path, "target_path")?;
        let _guard = self.plugin.ops.lock().await;
        self.detach(Path::new(&req.target_path), false)
            .map_err(internal)?;
        self.remember(&req.volume_id, |a| {
            a.publishes.remove(&req.target_path);
        });
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
        if !self.plugin.config.health.node_volume {
            return Err(Status::unimplemented(
                "node GET_VOLUME_HEALTH is not advertised by this driver",
            ));
        }
        self.plugin.fault("NodeGetVolumeHealth").await?;
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
        if !self.plugin.config.health.node_storage {
            return Err(Status::unimplemented(
                "GET_STORAGE_HEALTH is not advertised by this driver",
            ));
        }
        self.plugin.fault("NodeGetStorageHealth").await?;
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
            capability(RpcType::StageUnstageVolume),
            capability(RpcType::GetVolumeStats),
        ];
        if self.plugin.config.health.node_volume {
            caps.push(capability(RpcType::GetVolumeHealth));
        }
        if self.plugin.config.health.node_storage {
            caps.push(capability(RpcType::GetStorageHealth));
        }
        if self.plugin.config.legacy_condition {
            caps.push(v1::NodeServiceCapability {
                r#type: Some(CapType::Rpc(Rpc {
                    r#type: volhealth_legacy_bridge::wire::NODE_VOLUME_CONDITION,
                })),
            });
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
