//! The CSI Identity service.

use crate::plugin::Plugin;
use std::sync::Arc;
use tonic::{Request, Response, Status};
use volhealth_csi::v1;
use volhealth_csi::v1::plugin_capability::{Service, service};

/// Identity service of one driver process.
pub struct IdentityService {
    plugin: Arc<Plugin>,
}

impl IdentityService {
    /// Serves identity for `plugin`.
    pub fn new(plugin: Arc<Plugin>) -> Self {
        IdentityService { plugin }
    }
}

#[tonic::async_trait]
impl v1::identity_server::Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _req: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        self.plugin.fault("GetPluginInfo").await?;
        Ok(Response::new(v1::GetPluginInfoResponse {
            name: self.plugin.config.driver_name.clone(),
            vendor_version: env!("CARGO_PKG_VERSION").to_string(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _req: Request<v1::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<v1::GetPluginCapabilitiesResponse>, Status> {
        self.plugin.fault("GetPluginCapabilities").await?;
        let mut capabilities = Vec::new();
        if self.plugin.config.mode.serves_controller() {
            capabilities.push(v1::PluginCapability {
                r#type: Some(v1::plugin_capability::Type::Service(Service {
                    r#type: service::Type::ControllerService as i32,
                })),
            });
        }
        Ok(Response::new(v1::GetPluginCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn probe(
        &self,
        _req: Request<v1::ProbeRequest>,
    ) -> Result<Response<v1::ProbeResponse>, Status> {
        self.plugin.fault("Probe").await?;
        Ok(Response::new(v1::ProbeResponse { ready: Some(true) }))
    }
}
