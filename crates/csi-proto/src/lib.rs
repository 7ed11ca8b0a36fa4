//! CSI v1.13.0 messages for volhealth, without any transport: what a crate needs
//! to read, build or map CSI health reports (the `volhealth-csi` crate adds the
//! gRPC services, client and server on top of these types).
//!
//! # Layout
//!
//! - [`v1`]: the messages and enums of package `csi.v1`, generated at build time
//!   from `proto/csi.proto` with protox and prost-build. Messages with
//!   `csi_secret` fields get a generated `Debug` that hides the values.
//! - [`registration`]: the messages of the kubelet plugin registration API v1
//!   (`proto/pluginregistration.proto`).
//! - [`redact`]: what secret fields print instead of their values.
//! - [`FILE_DESCRIPTOR_SET`]: the compiled descriptor, checked against the
//!   released CSI v1.13.0 one by this crate's tests.

pub mod redact;

/// Package `csi.v1`: CSI v1.13.0 messages and enums.
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/csi.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/csi.v1.redacted_debug.rs"));
}

/// Package `pluginregistration`: the messages of the kubelet plugin registration API v1.
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod registration {
    include!(concat!(env!("OUT_DIR"), "/pluginregistration.rs"));

    /// `PluginInfo.type` of a CSI driver.
    pub const CSI_PLUGIN: &str = "CSIPlugin";
}

/// Encoded `FileDescriptorSet` of `csi.proto` and `pluginregistration.proto`, imports included.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/volhealth_descriptor.bin"));

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
