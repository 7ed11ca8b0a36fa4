//! A tiny CSI plugin for tests: Identity always, Controller and Node only when
//! given, each reporting a configurable capability list. Served for real on a
//! unix socket with `volhealth_csi::server::spawn_unix`.

#![allow(dead_code)]

use std::path::Path;

use tonic::transport::Server;
use tonic::transport::server::Router;
use tonic::{Request, Response, Status};
use volhealth_csi::capabilities::{controller_rpc, node_rpc};
use volhealth_csi::server::{Serving, SocketOptions, spawn_unix};
use volhealth_csi::v1;
use volhealth_csi::v1::controller_service_capability::rpc::Type as ControllerRpc;
use volhealth_csi::v1::node_service_capability::rpc::Type as NodeRpc;

/// What the plugin serves.
#[derive(Clone, Default)]
pub struct Config {
    pub name: String,
    /// `None`: no Controller service at all.
    pub controller: Option<Vec<ControllerRpc>>,
    /// `None`: no Node service at all.
    pub node: Option<Vec<NodeRpc>>,
}

struct IdentityImpl {
    name: String,
}

#[tonic::async_trait]
impl v1::identity_server::Identity for IdentityImpl {
    async fn get_plugin_info(
        &self,
        _: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        Ok(Response::new(v1::GetPluginInfoResponse {
            name: self.name.clone(),
            vendor_version: "0.0.1-test".into(),
            manifest: Default::default(),
        }))
    }
}

struct ControllerImpl {
    caps: Vec<ControllerRpc>,
}

#[tonic::async_trait]
impl v1::controller_server::Controller for ControllerImpl {
    async fn controller_get_capabilities(
        &self,
        _: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        Ok(Response::new(v1::ControllerGetCapabilitiesResponse {
            capabilities: self.caps.iter().copied().map(controller_rpc).collect(),
        }))
    }
}

struct NodeImpl {
    caps: Vec<NodeRpc>,
}

#[tonic::async_trait]
impl v1::node_server::Node for NodeImpl {
    async fn node_get_capabilities(
        &self,
        _: Request<v1::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<v1::NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(v1::NodeGetCapabilitiesResponse {
            capabilities: self.caps.iter().copied().map(node_rpc).collect(),
        }))
    }
}

/// The plugin's services as a tonic router.
pub fn router(config: &Config) -> Router {
    Server::builder()
        .add_service(v1::identity_server::IdentityServer::new(IdentityImpl {
            name: config.name.clone(),
        }))
        .add_optional_service(
            config
                .controller
                .clone()
                .map(|caps| v1::controller_server::ControllerServer::new(ControllerImpl { caps })),
        )
        .add_optional_service(
            config
                .node
                .clone()
                .map(|caps| v1::node_server::NodeServer::new(NodeImpl { caps })),
        )
}

/// A plugin serving in the background; dropped, it stops at once.
pub struct Running {
    pub endpoint: String,
    serving: Serving,
}

impl Running {
    /// Asks the server to stop and returns what `serve_unix` returned.
    pub async fn stop(self) -> volhealth_csi::Result<()> {
        self.serving.stop().await
    }

    /// Whether the server has ended by itself (it could not serve the socket).
    pub fn is_finished(&self) -> bool {
        self.serving.is_finished()
    }
}

/// Starts serving `config` at `unix://<socket>`.
pub fn start(socket: &Path, config: &Config) -> Running {
    let endpoint = format!("unix://{}", socket.display());
    let serving = spawn_unix(&endpoint, router(config), SocketOptions::default());
    Running { endpoint, serving }
}
