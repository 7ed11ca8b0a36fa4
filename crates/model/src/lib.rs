//! The rules of KEP-1432 volume health as pure functions: no I/O, no async, no clock.
//!
//! # Layout
//! - [`status`]: the API vocabulary (`Inaccessible`, `DataLoss`, `Degraded`, `StorageUnreachable`,
//!   `StorageDegraded`) and its mapping from the released CSI v1.13.0 enum numbers.
//! - [`report`]: a driver's answer turned into API conditions, with unknown values kept apart.
//! - [`sanitize`]: the API limits (16 conditions, CamelCase reasons, 256-byte reasons, 1024-byte
//!   messages, unique `(status, reason)`), applied so that every change is reported and no
//!   unhealthy volume is made to look healthy.
//! - [`reconcile`]: `stored + reported + now → what to write, or nothing`.
//! - [`recovery`]: the list-mode recovery tracker (two complete cycles, or one confirming Get).
//!
//! Both writers (the controller-side monitor and the node-side agent) are thin loops around
//! these functions, so every rule of the reconciliation contract is tested here once.

pub mod reconcile;
pub mod recovery;
pub mod report;
pub mod sanitize;
pub mod status;

pub use jiff::Timestamp;
pub use k8s_openapi::api::core::v1::{PodVolumeHealth, VolumeHealthCondition, VolumeHealthStatus};
pub use k8s_openapi::api::storage::v1::{StorageHealth, StorageHealthCondition};
pub use reconcile::{Write, reconcile_pod_volume, reconcile_pvc, reconcile_storage};
pub use recovery::{ListRecovery, ListVerdict};
pub use report::{Report, UnknownCondition, storage_report, volume_report};
pub use sanitize::Fix;
pub use status::{StorageStatus, VolumeStatus};
