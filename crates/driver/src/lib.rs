//! volhealth's reference CSI driver: hostpath-style volumes (directories or sparse ext4 images)
//! with real health detection and fault injection, for testing health consumers.
//!
//! Layout:
//! - [`config`]: what a driver process serves; [`run`] serves it until shutdown.
//! - [`state`], [`records`], [`attempts`]: the state dir and what the driver keeps in it.
//! - [`backend_dir`], [`backend_image`], [`mounts`]: how volumes are stored, staged and published.
//! - [`detect_controller`], [`detect_node`], [`detect_storage`]: real health detection;
//!   [`volume_view`] keeps the controller's view in memory, refreshed in the background.
//! - [`injection`], [`injection_watch`], [`fault`], [`paging`]: injected conditions, RPC faults
//!   and paging chaos, driven by `volhealth inject`.
//! - [`required_secret`]: `--require-secret-file`, which makes the controller health RPCs demand a
//!   `secrets` entry.
//! - [`identity`], [`controller`], [`node`], [`registration`]: the gRPC services, sharing a
//!   [`plugin::Plugin`]; [`condition`] is what they report before it becomes CSI messages.

pub mod attempts;
pub mod backend_dir;
pub mod backend_image;
pub mod condition;
pub mod config;
pub mod detect_controller;
pub mod detect_node;
pub mod detect_storage;
mod error;
pub mod fault;
pub mod injection;
pub mod injection_watch;
pub mod mounts;
pub mod records;
pub mod required_secret;
pub mod state;
pub mod volume_view;

pub use config::{BackendKind, DriverConfig, HealthCapabilities, Mode};
pub use error::{Error, Result};
pub mod controller;
pub mod identity;
pub mod legacy;
pub mod node;
pub mod paging;
pub mod plugin;
pub mod registration;
mod server;

pub use server::{run, socket_path};

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
