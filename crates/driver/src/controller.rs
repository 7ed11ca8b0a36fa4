//! The CSI Controller service: volumes as directories or sparse ext4 images, and controller-side
//! volume health answered from the in-memory view.

use crate::condition::merge;
use crate::config::BackendKind;
use crate::injection::{Injections, Side};
use crate::paging;
use crate::plugin::{HealthRpc, Plugin, internal, required, volume_health};
use crate::records::{self, VolumeRecord};
use crate::{backend_dir, backend_image};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tonic::{Request, Response, Status};
use volhealth_csi::capabilities::controller_rpc;
use volhealth_csi::v1;
use volhealth_csi::v1::controller_service_capability::rpc::Type as RpcType;

/// Capacity of a volume created without a capacity range.
pub const DEFAULT_CAPACITY: i64 = 1024 * 1024 * 1024;

/// Controller service of one driver process.
pub struct ControllerService {
    plugin: Arc<Plugin>,
}

impl ControllerService {
    /// Serves the controller for `plugin`.
    pub fn new(plugin: Arc<Plugin>) -> Self {
        ControllerService { plugin }
    }

    /// Detected conditions with the injected ones (fetched once per RPC) laid over them.
    pub(crate) fn conditions(
        inj: &Injections,
        entry: &crate::volume_view::Entry,
    ) -> Vec<crate::condition::Condition> {
        merge(
            entry.detected.clone(),
            inj.volume_conditions(&entry.record.id, Side::Controller),
        )
    }

    /// What both controller health RPCs do first: [`Plugin::health_rpc`], then UNAUTHENTICATED
    /// unless `secrets` hold what `--require-secret-file` demands.
    async fn health_rpc(
        &self,
        rpc: HealthRpc,
        secrets: &HashMap<String, String>,
    ) -> Result<(), Status> {
        self.plugin.health_rpc(rpc).await?;
        match &self.plugin.config.require_secret {
            Some(r) => r.check(rpc.method(), secrets),
            None => Ok(()),
        }
    }
}

fn capacity_for(range: Option<&v1::CapacityRange>, backend: BackendKind) -> Result<i64, Status> {
    let (required, limit) = range
        .map(|r| (r.required_bytes, r.limit_bytes))
        .unwrap_or((0, 0));
    if required < 0 || limit < 0 {
        return Err(Status::invalid_argument(
            "capacity_range bytes must not be negative",
        ));
    }
    let mut capacity = if required > 0 {
        required
    } else if limit > 0 {
        limit.min(DEFAULT_CAPACITY)
    } else {
        DEFAULT_CAPACITY
    };
    if backend == BackendKind::Image {
        capacity = capacity.max(backend_image::MIN_IMAGE_BYTES);
    }
    if limit > 0 && capacity > limit {
        return Err(Status::out_of_range(format!(
            "limit_bytes {limit} is below the smallest volume this backend makes ({capacity} bytes)"
        )));
    }
    Ok(capacity)
}

/// Why a volume capability is not offered: the message `ValidateVolumeCapabilities` answers and
/// `CreateVolume` refuses with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Unsupported {
    #[error("directory volumes cannot be used as raw block devices")]
    BlockOnDirectory,
    #[error("raw block access is not offered by this driver")]
    Block,
    #[error("image volumes are ext4, not {0}")]
    ImageFsType(String),
    #[error("a volume capability needs an access type (mount or block)")]
    NoAccessType,
    #[error("a volume capability needs an access mode")]
    NoAccessMode,
}

fn check_capabilities(
    caps: &[v1::VolumeCapability],
    backend: BackendKind,
) -> Result<(), Unsupported> {
    for cap in caps {
        match &cap.access_type {
            Some(v1::volume_capability::AccessType::Block(_)) if backend == BackendKind::Dir => {
                return Err(Unsupported::BlockOnDirectory);
            }
            Some(v1::volume_capability::AccessType::Block(_)) => {
                return Err(Unsupported::Block);
            }
            Some(v1::volume_capability::AccessType::Mount(m))
                if backend == BackendKind::Image
                    && !m.fs_type.is_empty()
                    && m.fs_type != "ext4" =>
            {
                return Err(Unsupported::ImageFsType(m.fs_type.clone()));
            }
            None => return Err(Unsupported::NoAccessType),
            _ => {}
        }
        if cap.access_mode.is_none() {
            return Err(Unsupported::NoAccessMode);
        }
    }
    Ok(())
}

fn context_of(plugin: &Plugin, rec: &VolumeRecord) -> HashMap<String, String> {
    let backend = match rec.backend {
        BackendKind::Dir => "dir",
        BackendKind::Image => "image",
    };
    HashMap::from([
        ("backend".to_string(), backend.to_string()),
        (
            "dataPath".to_string(),
            rec.data_path(&plugin.state).display().to_string(),
        ),
    ])
}

#[tonic::async_trait]
impl v1::controller_server::Controller for ControllerService {
    async fn create_volume(
        &self,
        req: Request<v1::CreateVolumeRequest>,
    ) -> Result<Response<v1::CreateVolumeResponse>, Status> {
        self.plugin.fault("CreateVolume").await?;
        let req = req.into_inner();
        required(&req.name, "name")?;
        if req.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument("volume_capabilities is required"));
        }
        if req.volume_content_source.is_some() {
            return Err(Status::invalid_argument(
                "creating a volume from a snapshot or volume is not supported",
            ));
        }
        let backend = match req.parameters.get("backend").map(String::as_str) {
            None => self.plugin.config.backend,
            Some("dir") => BackendKind::Dir,
            Some("image") => BackendKind::Image,
            Some(other) => {
                return Err(Status::invalid_argument(format!(
                    "parameter backend={other:?}: expected dir or image"
                )));
            }
        };
        check_capabilities(&req.volume_capabilities, backend)
            .map_err(|why| Status::invalid_argument(why.to_string()))?;
        let capacity = capacity_for(req.capacity_range.as_ref(), backend)?;
        let view = self.plugin.view()?;
        let id = records::volume_id_for(&req.name);
        let _guard = self.plugin.ops.lock().await;
        if let Some(existing) = view.get(&id) {
            let rec = existing.record;
            if rec.name != req.name || rec.capacity_bytes != capacity || rec.backend != backend {
                return Err(Status::already_exists(format!(
                    "volume {:?} exists as {} with {} bytes ({:?}); requested {capacity} bytes ({backend:?})",
                    req.name, rec.id, rec.capacity_bytes, rec.backend
                )));
            }
            let volume_context = context_of(&self.plugin, &rec);
            return Ok(Response::new(v1::CreateVolumeResponse {
                volume: Some(v1::Volume {
                    capacity_bytes: rec.capacity_bytes,
                    volume_id: rec.id,
                    volume_context,
                    ..Default::default()
                }),
            }));
        }
        let rec = VolumeRecord {
            id: id.clone(),
            name: req.name.clone(),
            backend,
            capacity_bytes: capacity,
            created_at: jiff::Timestamp::now().to_string(),
        };
        let path = rec.data_path(&self.plugin.state);
        match backend {
            BackendKind::Dir => backend_dir::create(&path).map_err(internal)?,
            BackendKind::Image => {
                backend_image::create(&path, capacity)
                    .await
                    .map_err(|e| match e {
                        crate::Error::Tool { .. } => {
                            Status::resource_exhausted(format!("creating image volume: {e}"))
                        }
                        other => internal(other),
                    })?
            }
        }
        records::store(&self.plugin.state, &rec).map_err(internal)?;
        view.insert(rec.clone());
        tracing::info!(volume_id = %rec.id, name = %rec.name, capacity, ?backend, "created volume");
        let volume_context = context_of(&self.plugin, &rec);
        Ok(Response::new(v1::CreateVolumeResponse {
            volume: Some(v1::Volume {
                capacity_bytes: capacity,
                volume_id: id,
                volume_context,
                ..Default::default()
            }),
        }))
    }

    async fn delete_volume(
        &self,
        req: Request<v1::DeleteVolumeRequest>,
    ) -> Result<Response<v1::DeleteVolumeResponse>, Status> {
        self.plugin.fault("DeleteVolume").await?;
        let req = req.into_inner();
        required(&req.volume_id, "volume_id")?;
        let view = self.plugin.view()?;
        let _guard = self.plugin.ops.lock().await;
        let Some(entry) = view.get(&req.volume_id) else {
            return Ok(Response::new(v1::DeleteVolumeResponse {}));
        };
        let path = entry.record.data_path(&self.plugin.state);
        match entry.record.backend {
            BackendKind::Dir => backend_dir::delete(&path).map_err(internal)?,
            BackendKind::Image => backend_image::delete(&path).map_err(internal)?,
        }
        records::remove(&self.plugin.state, &req.volume_id).map_err(internal)?;
        view.remove(&req.volume_id);
        tracing::info!(volume_id = %req.volume_id, "deleted volume");
        Ok(Response::new(v1::DeleteVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        req: Request<v1::ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<v1::ValidateVolumeCapabilitiesResponse>, Status> {
        self.plugin.fault("ValidateVolumeCapabilities").await?;
        let req = req.into_inner();
        required(&req.volume_id, "volume_id")?;
        if req.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument("volume_capabilities is required"));
        }
        let entry = self.plugin.volume(&req.volume_id)?;
        let resp = match check_capabilities(&req.volume_capabilities, entry.record.backend) {
            Ok(()) => v1::ValidateVolumeCapabilitiesResponse {
                confirmed: Some(v1::validate_volume_capabilities_response::Confirmed {
                    volume_context: req.volume_context,
                    volume_capabilities: req.volume_capabilities,
                    parameters: req.parameters,
                    mutable_parameters: req.mutable_parameters,
                }),
                message: String::new(),
            },
            Err(why) => v1::ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: why.to_string(),
            },
        };
        Ok(Response::new(resp))
    }

    async fn list_volumes(
        &self,
        req: Request<v1::ListVolumesRequest>,
    ) -> Result<Response<v1::ListVolumesResponse>, Status> {
        self.plugin.fault("ListVolumes").await?;
        let req = req.into_inner();
        let token = paging::parse(&req.starting_token)?;
        let max = paging::limit(req.max_entries)?;
        let view = self.plugin.view()?;
        let (page, next_token) = paging::page(view, &token, max, Default::default(), 0);
        let entries = page
            .into_iter()
            .map(|e| v1::list_volumes_response::Entry {
                volume: Some(v1::Volume {
                    capacity_bytes: e.record.capacity_bytes,
                    volume_context: context_of(&self.plugin, &e.record),
                    volume_id: e.record.id,
                    ..Default::default()
                }),
                status: None,
            })
            .collect();
        Ok(Response::new(v1::ListVolumesResponse {
            entries,
            next_token,
        }))
    }

    async fn controller_list_volume_health(
        &self,
        req: Request<v1::ControllerListVolumeHealthRequest>,
    ) -> Result<Response<v1::ControllerListVolumeHealthResponse>, Status> {
        self.health_rpc(HealthRpc::ControllerList, &req.get_ref().secrets)
            .await?;
        let req = req.into_inner();
        let token = paging::parse(&req.starting_token)?;
        let max = paging::limit(req.max_entries)?;
        let view = self.plugin.view()?;
        let inj = self.plugin.injections.current();
        let chaos = inj.list_chaos;
        let cycle = if token == paging::Token::Start {
            self.plugin.list_cycles.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.plugin.list_cycles.load(Ordering::Relaxed)
        };
        let (page, next_token) = paging::page(view, &token, max, chaos, cycle);
        let entries = page
            .iter()
            .map(|e| volume_health(&e.record.id, &Self::conditions(&inj, e)))
            .collect();
        Ok(Response::new(v1::ControllerListVolumeHealthResponse {
            entries,
            next_token,
        }))
    }

    async fn controller_get_volume_health(
        &self,
        req: Request<v1::ControllerGetVolumeHealthRequest>,
    ) -> Result<Response<v1::ControllerGetVolumeHealthResponse>, Status> {
        self.health_rpc(HealthRpc::ControllerGet, &req.get_ref().secrets)
            .await?;
        let req = req.into_inner();
        required(&req.volume_id, "volume_id")?;
        let entry = self.plugin.volume(&req.volume_id)?;
        Ok(Response::new(v1::ControllerGetVolumeHealthResponse {
            volume_health: Some(volume_health(
                &entry.record.id,
                &Self::conditions(&self.plugin.injections.current(), &entry),
            )),
        }))
    }

    async fn get_capacity(
        &self,
        _req: Request<v1::GetCapacityRequest>,
    ) -> Result<Response<v1::GetCapacityResponse>, Status> {
        self.plugin.fault("GetCapacity").await?;
        let stats = crate::detect_controller::fs_stats(&self.plugin.state.volumes_dir())
            .ok_or_else(|| {
                Status::unavailable("cannot read the free space of the volumes directory")
            })?;
        Ok(Response::new(v1::GetCapacityResponse {
            available_capacity: i64::try_from(stats.available_bytes).unwrap_or(i64::MAX),
            maximum_volume_size: None,
            minimum_volume_size: None,
        }))
    }

    async fn controller_get_capabilities(
        &self,
        _req: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        self.plugin.fault("ControllerGetCapabilities").await?;
        let mut caps = vec![
            controller_rpc(RpcType::CreateDeleteVolume),
            controller_rpc(RpcType::ListVolumes),
            controller_rpc(RpcType::GetCapacity),
        ];
        if self.plugin.config.health.get {
            caps.push(controller_rpc(RpcType::GetVolumeHealth));
        }
        if self.plugin.config.health.list {
            caps.push(controller_rpc(RpcType::ListVolumeHealth));
        }
        if self.plugin.config.legacy_condition {
            caps.push(controller_rpc(RpcType::GetVolume));
            caps.push(controller_rpc(
                volhealth_legacy_bridge::wire::CONTROLLER_VOLUME_CONDITION,
            ));
        }
        Ok(Response::new(v1::ControllerGetCapabilitiesResponse {
            capabilities: caps,
        }))
    }
}
