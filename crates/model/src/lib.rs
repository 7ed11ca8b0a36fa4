//! The rules of KEP-1432 volume health as pure functions: no I/O, no async, no clock.
//!
//! # Layout
//! - [`status`]: the API vocabulary (`Inaccessible`, `DataLoss`, `Degraded`, `StorageUnreachable`,
//!   `StorageDegraded`) and its mapping from the released CSI v1.13.0 enum numbers.
//! - [`report`]: a driver's answer turned into API conditions, with unknown values kept apart.
//! - [`sanitize`]: the API limits (16 conditions, CamelCase reasons, 256-byte reasons, 1024-byte
//!   messages, unique `(status, reason)`), applied so that every change is reported and no
//!   unhealthy volume is made to look healthy.
//! - [`equality`]: when two condition lists are the same (no-op suppression, Events, overlays).
//! - [`api_time`]: the whole-second precision of `lastTransitionTime`.
//! - [`reconcile`]: `stored + reported + now → what to write, or nothing`, and the keyed-list
//!   form the pod and CSINode paths share.
//! - [`identity`]: the node identity's names (`system:node:NAME`, `system:nodes`).
//! - [`recovery`]: the list-mode recovery tracker (two complete cycles, or one confirming Get).
//! - [`pattern`]: the `*`/`?` patterns settings match condition text with (the legacy bridge's
//!   rules, the remediation policy).
//!
//! Both writers (the controller-side monitor and the node-side agent) are thin loops around
//! these functions, so every rule of the reconciliation contract is tested here once.

pub mod api_time;
pub mod equality;
pub mod identity;
pub mod pattern;
pub mod reconcile;
pub mod recovery;
pub mod report;
pub mod sanitize;
pub mod status;
#[cfg(test)]
mod tests;

pub use api_time::api_time;
pub use equality::{condition_key, condition_keys, same_conditions, same_keys};
pub use jiff::Timestamp;
pub use k8s_openapi::api::core::v1::{PodVolumeHealth, VolumeHealthCondition, VolumeHealthStatus};
pub use k8s_openapi::api::storage::v1::{StorageHealth, StorageHealthCondition};
pub use reconcile::{
    NamedEntry, Write, claim_conditions, reconcile_entry, reconcile_pod_volume, reconcile_pvc,
    reconcile_storage,
};
pub use recovery::{ListRecovery, ListVerdict};
pub use report::{Report, UnknownCondition, storage_report, volume_report};
pub use sanitize::Fix;
pub use status::{StorageStatus, VolumeStatus};

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
