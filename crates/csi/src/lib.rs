//! CSI v1.13.0 protocol for volhealth: generated gRPC types, unix-socket
//! client and server helpers, health capability probing and secret redaction.
//!
//! # Layout
//!
//! - [`v1`]: messages, clients (`*_client`) and servers (`*_server`) of package `csi.v1`,
//!   generated at build time from `proto/csi.proto` with protox and tonic-prost-build.
//!   Messages with `csi_secret` fields get a generated `Debug` that hides the values.
//! - [`registration`]: the kubelet plugin registration API v1 (`proto/pluginregistration.proto`).
//! - [`endpoint`]: `unix:///path`-style endpoint strings to socket paths.
//! - [`client`]: [`client::connect`], waiting for a driver's socket with backoff.
//! - [`server`]: [`server::serve_unix`], serving a tonic router on a unix socket.
//! - [`capabilities`]: [`capabilities::probe`], which health RPCs a driver offers.
//! - [`redact`]: what secret fields print instead of their values.
//! - [`Error`] / [`Result`]: errors name the socket or RPC, never request contents.

pub mod capabilities;
pub mod client;
pub mod endpoint;
mod error;
pub mod redact;
pub mod server;

pub use error::{Error, Result};

/// Package `csi.v1`: CSI v1.13.0 messages, clients (`*_client`) and servers (`*_server`).
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod v1 {
    tonic::include_proto!("csi.v1");
    include!(concat!(env!("OUT_DIR"), "/csi.v1.redacted_debug.rs"));
}

/// Package `pluginregistration`: the kubelet plugin registration API v1.
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod registration {
    tonic::include_proto!("pluginregistration");

    /// `PluginInfo.type` of a CSI driver.
    pub const CSI_PLUGIN: &str = "CSIPlugin";
}

/// Encoded `FileDescriptorSet` of `csi.proto` and `pluginregistration.proto`, imports included.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/volhealth_descriptor.bin"));
