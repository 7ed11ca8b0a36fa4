//! CSI v1.13.0 transport for volhealth: generated gRPC services, unix-socket
//! client and server helpers and health capability probing. The messages (with
//! their secret-redacting `Debug`) come from `volhealth-csi-proto` and are
//! re-exported here, so `volhealth_csi::v1::X` names the same type.
//!
//! # Layout
//!
//! - [`v1`]: the messages of package `csi.v1` (re-exported), and its clients (`*_client`) and
//!   servers (`*_server`), generated at build time from `proto/csi.proto` with protox and
//!   tonic-prost-build.
//! - [`registration`]: the kubelet plugin registration API v1 (`proto/pluginregistration.proto`).
//! - [`endpoint`]: `unix:///path`-style endpoint strings to socket paths.
//! - [`client`]: [`client::connect`], waiting for a driver's socket with backoff.
//! - [`server`]: [`server::serve_unix`], serving a tonic router on a unix socket, and
//!   [`server::spawn_unix`], serving one in the background.
//! - [`socket_address`]: the address of a socket path of any length (deep directories included).
//! - [`node_requests`]: the stage, publish, unpublish and unstage requests of a filesystem
//!   volume, as the kubelet sends them.
//! - [`capabilities`]: [`capabilities::probe`], which health RPCs a driver offers.
//! - [`redact`]: what secret fields print instead of their values.
//! - [`Error`] / [`Result`]: errors name the socket or RPC, never request contents.

pub mod capabilities;
pub mod client;
pub mod endpoint;
mod error;
pub mod node_requests;
pub mod server;
pub mod socket_address;

pub use error::{ConnectFailure, Error, Result};
pub use volhealth_csi_proto::{FILE_DESCRIPTOR_SET, redact};

/// Package `csi.v1`: CSI v1.13.0 messages, clients (`*_client`) and servers (`*_server`).
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod v1 {
    pub use volhealth_csi_proto::v1::*;
    tonic::include_proto!("csi.v1");
}

/// Package `pluginregistration`: the kubelet plugin registration API v1.
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod registration {
    pub use volhealth_csi_proto::registration::*;
    tonic::include_proto!("pluginregistration");
}

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
