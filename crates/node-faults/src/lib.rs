//! Volume and storage health for the volumes whose CSI driver reports none, from what the node
//! itself sees: the host mount table, `statfs` probes under a deadline on dedicated threads, the
//! kernel log (`/dev/kmsg`) and sysfs.
//!
//! The answers have the shape of NodeGetVolumeHealth and NodeGetStorageHealth, so the agent uses
//! the detector in place of (or beside) a driver's own node health, and a CSI proxy could serve
//! it as those RPCs. An error means "could not look" and is never to be read as healthy.
//!
//! # Layout
//!
//! - [`detector`]: [`Detector`], which turns the signals into CSI health entries.
//! - [`mount_table`]: mountinfo parsing (fields relative to the ` - ` separator, octal escapes).
//! - [`probe_pool`]: bounded `statfs` threads, one probe in flight per path, deadlines.
//! - [`kernel_lines`]: what a kernel log line says (device, effect), whatever its facility.
//! - [`kernel_log`]: the `/dev/kmsg` reader thread and the bounded memory of recent events.
//! - [`block_devices`]: sysfs: the block devices under a filesystem, iSCSI sessions, multipath
//!   paths.
//! - [`reasons`]: the reported reasons; [`metrics`]: the Prometheus series.

pub mod block_devices;
pub mod detector;
pub mod kernel_lines;
pub mod kernel_log;
pub mod metrics;
pub mod mount_table;
pub mod probe_pool;
pub mod reasons;

pub use detector::{Detector, DetectorConfig, VolumeQuery};

#[cfg(test)]
mod tests;
pub use metrics::NodeFaultMetrics;

/// Why the detector gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// It could not look (no mount table, no probe thread free, nothing known of the driver).
    #[error("node fault detection could not look: {0}")]
    CannotLook(String),
}

/// Result of the detector.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
