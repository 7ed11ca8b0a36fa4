//! Health conditions as the driver computes them, before they become CSI messages.

use serde::{Deserialize, Serialize};

/// Raw `VolumeHealthErrorType` numbers of CSI v1.13.0.
pub mod volume_status {
    /// DEGRADED.
    pub const DEGRADED: i32 = 1;
    /// INACCESSIBLE.
    pub const INACCESSIBLE: i32 = 2;
    /// DATA_LOSS.
    pub const DATA_LOSS: i32 = 3;
}

/// Raw `StorageHealthErrorType` numbers of CSI v1.13.0.
pub mod storage_status {
    /// STORAGE_DEGRADED.
    pub const STORAGE_DEGRADED: i32 = 1;
    /// STORAGE_UNREACHABLE.
    pub const STORAGE_UNREACHABLE: i32 = 2;
}

/// One volume health entry: a raw status number (unknown numbers are sent as they are).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// `VolumeHealthErrorType` number.
    pub status: i32,
    /// CamelCase reason.
    pub reason: String,
    /// What was observed.
    pub message: String,
}

impl Condition {
    /// Builds a condition.
    pub fn new(status: i32, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            status,
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

/// The volume mode a storage condition applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeMode {
    /// Mounted filesystems.
    Filesystem,
    /// Raw block devices.
    Block,
}

/// One storage backend health entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageCondition {
    /// `StorageHealthErrorType` number.
    pub status: i32,
    /// CamelCase reason.
    pub reason: String,
    /// What was observed.
    pub message: String,
    /// CSI access mode number this applies to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<i32>,
    /// Volume mode this applies to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<VolumeMode>,
}

/// Detected conditions with injected ones laid over them: an injected entry replaces a detected
/// one with the same (status, reason).
pub fn merge(
    detected: Vec<Condition>,
    injected: impl IntoIterator<Item = Condition>,
) -> Vec<Condition> {
    let injected: Vec<Condition> = injected.into_iter().collect();
    let mut out: Vec<Condition> = detected
        .into_iter()
        .filter(|d| {
            !injected
                .iter()
                .any(|i| i.status == d.status && i.reason == d.reason)
        })
        .collect();
    out.extend(injected);
    out
}

/// Storage version of [`merge`]; the key also holds the access and volume modes.
pub fn merge_storage(
    detected: Vec<StorageCondition>,
    injected: impl IntoIterator<Item = StorageCondition>,
) -> Vec<StorageCondition> {
    let injected: Vec<StorageCondition> = injected.into_iter().collect();
    let same = |a: &StorageCondition, b: &StorageCondition| {
        a.status == b.status
            && a.reason == b.reason
            && a.access_mode == b.access_mode
            && a.volume_mode == b.volume_mode
    };
    let mut out: Vec<StorageCondition> = detected
        .into_iter()
        .filter(|d| !injected.iter().any(|i| same(i, d)))
        .collect();
    out.extend(injected);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injected_wins_on_same_status_and_reason() {
        let detected = vec![
            Condition::new(volume_status::INACCESSIBLE, "VolumeNotFound", "detected"),
            Condition::new(volume_status::DEGRADED, "SlowIo", "detected"),
        ];
        let injected = vec![Condition::new(
            volume_status::INACCESSIBLE,
            "VolumeNotFound",
            "injected",
        )];
        let merged = merge(detected, injected);
        assert_eq!(merged.len(), 2);
        assert!(
            merged
                .iter()
                .any(|c| c.reason == "VolumeNotFound" && c.message == "injected")
        );
        assert!(merged.iter().any(|c| c.reason == "SlowIo"));
    }
}
