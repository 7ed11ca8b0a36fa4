//! In-process worlds for the libraries' own tests. The embedded API server and the reference
//! driver run in this process, each on its own thread and runtime (as they would run in their
//! own processes), and are stopped through their shutdown futures; tests talk to them over real
//! HTTP and a real unix socket. What the kubelet and a provisioner would do to a volume is played
//! by hand with real CSI calls. Waits are on conditions with deadlines, never fixed sleeps.
//!
//! Test support: failures panic with what was being done, as tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod kernel_faults;
mod node_world;
mod service;
mod world;

pub use node_world::{KubeletLayout, NodeWorld, TOKENS};
pub use service::Service;
pub use world::{
    ApiServer, Driver, Outage, bind_claim, client_for, create, stage_and_publish,
    stage_and_publish_via, wait_for,
};

/// No two source files of this crate, and no two of its top-level modules, import each other.
#[cfg(test)]
#[test]
fn source_files_import_one_another_in_one_direction() {
    assert!(volhealth_module_graph::assert_acyclic(env!("CARGO_MANIFEST_DIR")) > 0);
}
