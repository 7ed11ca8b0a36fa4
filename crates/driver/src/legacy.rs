//! The legacy VOLUME_CONDITION shape of CSI v1.3.0 – v1.12.0, spoken on request
//! (`--health-api legacy|both`), so that the bridge, the tests and the bench have a legacy driver
//! that finds real faults. ListVolumes, ControllerGetVolume and NodeGetVolumeStats carry the same
//! conditions the v1.13 health RPCs report, folded into the legacy shape: `abnormal` when there
//! is any, the messages joined with "; ". The status and reason do not survive the shape; that is
//! the shape's loss, and what the bridge's rules are for.

use crate::condition::Condition;
use crate::controller::ControllerService;
use crate::node::NodeService;
use crate::plugin::{Plugin, required};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};
use volhealth_csi::server::serve_unary;
use volhealth_csi::v1;
use volhealth_csi::v1::controller_server::Controller as _;
use volhealth_csi::v1::node_server::Node as _;
use volhealth_legacy_bridge::wire;

/// The legacy condition for `conditions`: healthy when there are none.
pub fn condition(conditions: &[Condition]) -> wire::VolumeCondition {
    wire::VolumeCondition {
        abnormal: !conditions.is_empty(),
        message: conditions
            .iter()
            .map(|c| c.message.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// A Controller or Node service with the three legacy methods answered here (when the driver
/// speaks the legacy shape) and every other call passed to `inner`.
#[derive(Clone)]
pub struct LegacyRoutes<S> {
    inner: S,
    plugin: Arc<Plugin>,
}

impl<S> LegacyRoutes<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, plugin: Arc<Plugin>) -> Self {
        LegacyRoutes { inner, plugin }
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for LegacyRoutes<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for LegacyRoutes<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if !self.plugin.config.legacy_condition {
            return Box::pin(self.inner.call(req));
        }
        let plugin = self.plugin.clone();
        match req.uri().path() {
            wire::LIST_VOLUMES => Box::pin(async move {
                Ok(serve_unary(req, move |r| list_volumes(plugin.clone(), r)).await)
            }),
            wire::CONTROLLER_GET_VOLUME_PATH => Box::pin(async move {
                Ok(serve_unary(req, move |r| get_volume(plugin.clone(), r)).await)
            }),
            wire::NODE_GET_VOLUME_STATS_PATH => Box::pin(async move {
                Ok(serve_unary(req, move |r| volume_stats(plugin.clone(), r)).await)
            }),
            _ => Box::pin(self.inner.call(req)),
        }
    }
}

async fn list_volumes(
    plugin: Arc<Plugin>,
    req: v1::ListVolumesRequest,
) -> Result<wire::ListVolumesResponse, Status> {
    let answer = ControllerService::new(plugin.clone())
        .list_volumes(tonic::Request::new(req))
        .await?
        .into_inner();
    let view = plugin.view()?;
    let inj = plugin.injections.current();
    let entries = answer
        .entries
        .into_iter()
        .map(|e| {
            let id = e
                .volume
                .as_ref()
                .map(|v| v.volume_id.clone())
                .unwrap_or_default();
            let volume_condition = view
                .get(&id)
                .map(|entry| condition(&ControllerService::conditions(&inj, &entry)));
            wire::ListEntry {
                volume: e.volume,
                status: Some(wire::VolumeStatus {
                    published_node_ids: e.status.map(|s| s.published_node_ids).unwrap_or_default(),
                    volume_condition,
                }),
            }
        })
        .collect();
    Ok(wire::ListVolumesResponse {
        entries,
        next_token: answer.next_token,
    })
}

async fn get_volume(
    plugin: Arc<Plugin>,
    req: v1::ControllerGetVolumeRequest,
) -> Result<wire::ControllerGetVolumeResponse, Status> {
    plugin.fault("ControllerGetVolume").await?;
    required(&req.volume_id, "volume_id")?;
    let entry = plugin.volume(&req.volume_id)?;
    let conditions = ControllerService::conditions(&plugin.injections.current(), &entry);
    Ok(wire::ControllerGetVolumeResponse {
        volume: Some(v1::Volume {
            capacity_bytes: entry.record.capacity_bytes,
            volume_id: entry.record.id.clone(),
            ..Default::default()
        }),
        status: Some(wire::VolumeStatus {
            published_node_ids: Vec::new(),
            volume_condition: Some(condition(&conditions)),
        }),
    })
}

async fn volume_stats(
    plugin: Arc<Plugin>,
    req: v1::NodeGetVolumeStatsRequest,
) -> Result<wire::NodeGetVolumeStatsResponse, Status> {
    let node = NodeService::new(plugin);
    let (id, path, staging) = (
        req.volume_id.clone(),
        req.volume_path.clone(),
        req.staging_target_path.clone(),
    );
    // Usage first: a path that is gone answers NOT_FOUND, as the legacy spec has it.
    let usage = node
        .node_get_volume_stats(tonic::Request::new(req))
        .await?
        .into_inner()
        .usage;
    let (publish, staging) = if path == staging {
        (String::new(), staging)
    } else {
        (path, staging)
    };
    let conditions = node.volume_conditions(&id, publish, staging).await?;
    Ok(wire::NodeGetVolumeStatsResponse {
        usage,
        volume_condition: Some(condition(&conditions)),
    })
}
