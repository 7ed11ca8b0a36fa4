//! CSI v1.13.0 protocol for volhealth.
//!
//! # Layout
//!
//! - [`v1`]: generated messages, clients and servers of package `csi.v1`, built from
//!   `proto/csi.proto`. Messages with `csi_secret` fields have a `Debug` that hides them.
//! - [`registration`]: the kubelet plugin registration API (package `pluginregistration`).
//! - [`redact`]: what secret fields print instead of their values.

pub mod redact;

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

/// Encoded `FileDescriptorSet` of `csi.proto` and `pluginregistration.proto`, with imports.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/volhealth_descriptor.bin"));
