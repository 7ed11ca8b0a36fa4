//! What the proxy answers itself: the capability answers (the driver's, with the health
//! capabilities the bridge can serve added) and the health RPCs the driver lacks.

use crate::inner::{Inner, Known};
use http::{Request, Response};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tonic::Status;
use tonic::body::Body;
use volhealth_csi::capabilities::{ControllerHealthMode, controller_rpc, node_rpc};
use volhealth_csi::server::serve_unary;
use volhealth_csi::v1;
use volhealth_csi::v1::controller_service_capability::rpc::Type as ControllerRpc;
use volhealth_csi::v1::node_service_capability::rpc::Type as NodeRpc;
use volhealth_legacy_bridge::{Bridge, LegacyController, LegacyModes, LegacyNode};
use volhealth_node_faults::{Detector, VolumeQuery};

pub(crate) const CONTROLLER_CAPS: &str = "/csi.v1.Controller/ControllerGetCapabilities";
pub(crate) const NODE_CAPS: &str = "/csi.v1.Node/NodeGetCapabilities";
pub(crate) const CONTROLLER_GET_HEALTH: &str = "/csi.v1.Controller/ControllerGetVolumeHealth";
pub(crate) const CONTROLLER_LIST_HEALTH: &str = "/csi.v1.Controller/ControllerListVolumeHealth";
pub(crate) const NODE_GET_HEALTH: &str = "/csi.v1.Node/NodeGetVolumeHealth";
pub(crate) const NODE_STORAGE_HEALTH: &str = "/csi.v1.Node/NodeGetStorageHealth";

impl Known {
    fn native_get(&self) -> bool {
        matches!(
            self.native.controller,
            ControllerHealthMode::Get | ControllerHealthMode::List { get: true }
        )
    }

    fn native_list(&self) -> bool {
        matches!(self.native.controller, ControllerHealthMode::List { .. })
    }

    /// The bridge answers ControllerGetVolumeHealth.
    fn bridged_get(&self) -> Option<&LegacyController> {
        (!self.native_get() && self.modes.get_volume)
            .then_some(self.controller.as_ref())
            .flatten()
    }

    /// The bridge answers ControllerListVolumeHealth (only beside Get, as the spec requires).
    fn bridged_list(&self) -> Option<&LegacyController> {
        (!self.native_list() && self.modes.list_volumes && self.modes.get_volume)
            .then_some(self.controller.as_ref())
            .flatten()
    }

    /// The bridge answers NodeGetVolumeHealth.
    fn bridged_node(&self) -> Option<&LegacyNode> {
        (!self.native.node.volume)
            .then_some(self.node.as_ref())
            .flatten()
    }

    /// The detector answers NodeGetVolumeHealth: the driver has neither the RPC nor the legacy
    /// condition.
    fn detected_volume<'a>(&self, inner: &'a Inner) -> Option<&'a Arc<Detector>> {
        (!self.native.node.volume && self.node.is_none())
            .then_some(inner.config.node_faults.as_ref())
            .flatten()
    }

    /// The detector answers NodeGetStorageHealth: the driver does not.
    fn detected_storage<'a>(&self, inner: &'a Inner) -> Option<&'a Arc<Detector>> {
        (!self.native.node.storage)
            .then_some(inner.config.node_faults.as_ref())
            .flatten()
    }
}

async fn probe(inner: &Inner) -> Option<Known> {
    let (channel, timeout) = (inner.channel.clone(), inner.config.timeout);
    let native = match volhealth_csi::capabilities::probe(channel.clone(), timeout).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("asking the driver for its capabilities: {e}");
            return None;
        }
    };
    let lacks = native.controller == ControllerHealthMode::None || !native.node.volume;
    let modes = if inner.config.legacy && lacks {
        volhealth_legacy_bridge::probe(channel.clone(), timeout)
            .await
            .unwrap_or_else(|s| {
                tracing::warn!(
                    "asking the driver for its legacy capabilities: {}",
                    s.message()
                );
                LegacyModes::default()
            })
    } else {
        LegacyModes::default()
    };
    let bridge = || {
        Bridge::new(
            native.driver_name.clone(),
            inner.config.rules.clone(),
            inner.config.debounce,
        )
    };
    Some(Known {
        controller: modes
            .controller()
            .then(|| LegacyController::new(channel.clone(), bridge(), modes)),
        node: modes
            .node_volume_stats
            .then(|| LegacyNode::new(channel.clone(), bridge())),
        native,
        modes,
    })
}

/// What is known of the driver; probed when nothing is, or again when `refresh` (a consumer
/// asking for capabilities). The bridges, and their NOT_FOUND counts, stay while the driver's
/// capabilities stay the same.
async fn known(inner: &Inner, refresh: bool) -> Option<Known> {
    let mut held = inner.known.lock().await;
    if (refresh || held.is_none())
        && let Some(fresh) = probe(inner).await
    {
        let same = held
            .as_ref()
            .is_some_and(|k| k.native == fresh.native && k.modes == fresh.modes);
        if !same {
            *held = Some(fresh);
        }
    }
    held.clone()
}

/// ControllerGetCapabilities and NodeGetCapabilities: the driver's answer with the health
/// capabilities added that the bridge serves.
pub(crate) async fn capabilities(inner: &Inner, path: &str, req: Request<Body>) -> Response<Body> {
    let k = known(inner, true).await;
    let channel = inner.channel.clone();
    if path == CONTROLLER_CAPS {
        serve_unary(req, move |r: v1::ControllerGetCapabilitiesRequest| {
            let (channel, k) = (channel.clone(), k.clone());
            async move {
                let mut client = v1::controller_client::ControllerClient::new(channel);
                let mut resp = client.controller_get_capabilities(r).await?.into_inner();
                if let Some(k) = k {
                    let mut add = |t: ControllerRpc| resp.capabilities.push(controller_rpc(t));
                    if k.bridged_get().is_some() {
                        add(ControllerRpc::GetVolumeHealth);
                    }
                    if k.bridged_list().is_some() {
                        add(ControllerRpc::ListVolumeHealth);
                    }
                }
                Ok(resp)
            }
        })
        .await
    } else {
        let (volume, storage) = match &k {
            Some(k) => (
                k.bridged_node().is_some() || k.detected_volume(inner).is_some(),
                k.detected_storage(inner).is_some(),
            ),
            None => (false, false),
        };
        serve_unary(req, move |r: v1::NodeGetCapabilitiesRequest| {
            let channel = channel.clone();
            async move {
                let mut client = v1::node_client::NodeClient::new(channel);
                let mut resp = client.node_get_capabilities(r).await?.into_inner();
                let mut add = |t: NodeRpc| resp.capabilities.push(node_rpc(t));
                if volume {
                    add(NodeRpc::GetVolumeHealth);
                }
                if storage {
                    add(NodeRpc::GetStorageHealth);
                }
                Ok(resp)
            }
        })
        .await
    }
}

/// A health RPC the bridge answers; `Err(req)` hands it back to be forwarded (the driver has the
/// RPC itself, or nothing can stand in for it).
pub(crate) async fn health(
    inner: &std::sync::Arc<Inner>,
    path: &str,
    req: Request<Body>,
) -> Result<Response<Body>, Request<Body>> {
    let Some(k) = known(inner, false).await else {
        return Err(req);
    };
    let timeout = inner.config.timeout;
    match path {
        CONTROLLER_GET_HEALTH => {
            let Some(c) = k.bridged_get().cloned() else {
                return Err(req);
            };
            Ok(
                serve_unary(req, move |r: v1::ControllerGetVolumeHealthRequest| {
                    let c = c.clone();
                    async move {
                        if r.volume_id.is_empty() {
                            return Err(Status::invalid_argument("volume_id is required"));
                        }
                        let h = within(timeout, c.get(r.volume_id)).await?;
                        Ok(v1::ControllerGetVolumeHealthResponse {
                            volume_health: Some(h),
                        })
                    }
                })
                .await,
            )
        }
        CONTROLLER_LIST_HEALTH => {
            let Some(c) = k.bridged_list().cloned() else {
                return Err(req);
            };
            Ok(
                serve_unary(req, move |r: v1::ControllerListVolumeHealthRequest| {
                    let c = c.clone();
                    async move {
                        if r.max_entries < 0 {
                            return Err(Status::invalid_argument(
                                "max_entries must not be negative",
                            ));
                        }
                        let (entries, next_token) =
                            within(timeout, c.list_page(r.max_entries, r.starting_token)).await?;
                        Ok(v1::ControllerListVolumeHealthResponse {
                            entries,
                            next_token,
                        })
                    }
                })
                .await,
            )
        }
        NODE_STORAGE_HEALTH => {
            let (Some(d), Some(driver)) = (k.detected_storage(inner).cloned(), k.driver()) else {
                return Err(req);
            };
            Ok(serve_unary(req, move |_: v1::NodeGetStorageHealthRequest| {
                let (d, driver) = (d.clone(), driver.clone());
                async move {
                    let backend_health = d
                        .storage_health(&driver)
                        .await
                        .map_err(|e| Status::unavailable(e.to_string()))?;
                    Ok(v1::NodeGetStorageHealthResponse { backend_health })
                }
            })
            .await)
        }
        _ if k.bridged_node().is_none() => {
            let (Some(d), Some(driver)) = (k.detected_volume(inner).cloned(), k.driver()) else {
                return Err(req);
            };
            let inner = inner.clone();
            Ok(serve_unary(req, move |r: v1::NodeGetVolumeHealthRequest| {
                let (d, driver, inner) = (d.clone(), driver.clone(), inner.clone());
                async move {
                    let query = query(&inner, driver, r)?;
                    let health_statuses = d
                        .volume_health(&query)
                        .await
                        .map_err(|e| Status::unavailable(e.to_string()))?;
                    Ok(v1::NodeGetVolumeHealthResponse {
                        volume_health: Some(v1::VolumeHealth {
                            volume_id: query.volume_id,
                            health_statuses,
                        }),
                    })
                }
            })
            .await)
        }
        _ => {
            let Some(n) = k.bridged_node().cloned() else {
                return Err(req);
            };
            let inner = inner.clone();
            Ok(
                serve_unary(req, move |mut r: v1::NodeGetVolumeHealthRequest| {
                    let n = n.clone();
                    let (publish, staging) = inner.paths_of(&r.volume_id);
                    async move {
                        if r.volume_id.is_empty() {
                            return Err(Status::invalid_argument("volume_id is required"));
                        }
                        if r.volume_publish_path.is_empty() && r.staging_target_path.is_empty() {
                            r.volume_publish_path = publish;
                            r.staging_target_path = staging;
                        }
                        if r.volume_publish_path.is_empty() && r.staging_target_path.is_empty() {
                            return Err(Status::not_found(format!(
                                "volume {} is neither staged nor published through this proxy",
                                r.volume_id
                            )));
                        }
                        let h = within(timeout, n.volume_health(r)).await?;
                        Ok(v1::NodeGetVolumeHealthResponse {
                            volume_health: Some(h),
                        })
                    }
                })
                .await,
            )
        }
    }
}

/// The volume and paths to look at: the request's, or those learned for its volume; a volume
/// neither named with a path nor staged or published through the proxy is NOT_FOUND.
fn query(
    inner: &Inner,
    driver: String,
    r: v1::NodeGetVolumeHealthRequest,
) -> Result<VolumeQuery, Status> {
    if r.volume_id.is_empty() {
        return Err(Status::invalid_argument("volume_id is required"));
    }
    let (mut publish, mut staging) = (r.volume_publish_path, r.staging_target_path);
    if publish.is_empty() && staging.is_empty() {
        (publish, staging) = inner.paths_of(&r.volume_id);
    }
    if publish.is_empty() && staging.is_empty() {
        return Err(Status::not_found(format!(
            "volume {} is neither staged nor published through this proxy",
            r.volume_id
        )));
    }
    let path = |p: String| (!p.is_empty()).then(|| PathBuf::from(p));
    Ok(VolumeQuery {
        driver,
        volume_id: r.volume_id,
        publish_path: path(publish),
        staging_path: path(staging),
    })
}

async fn within<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(Status::deadline_exceeded(format!(
                "the driver did not answer within {timeout:?}"
            )))
        })
}
