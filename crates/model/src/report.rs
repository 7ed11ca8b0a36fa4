//! A driver's answer turned into API conditions, with values this version does not know kept
//! apart so callers can surface them (Event and metric) instead of reading them as healthy.

use crate::sanitize::{
    Condition, Fix, MAX_CONDITIONS, MAX_MESSAGE_BYTES, MAX_REASON_BYTES, sanitize, truncate_utf8,
};
use crate::{StorageHealthCondition, StorageStatus, VolumeHealthCondition, VolumeStatus};
use volhealth_csi_proto::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_csi_proto::v1::volume_capability::{AccessType, access_mode::Mode};
use volhealth_csi_proto::v1::volume_health::VolumeHealthEntry;

/// An entry whose numeric status this version does not know. Never treated as healthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCondition {
    /// The raw enum value the driver sent.
    pub raw_status: i32,
    /// The driver's reason, cut to the API limit.
    pub reason: String,
    /// The driver's message, cut to the API limit.
    pub message: String,
}

/// A driver report mapped to API conditions and sanitised within the API limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Report<C> {
    /// Conditions to store, most severe first.
    pub conditions: Vec<C>,
    /// Entries with status values this version does not know.
    pub unknown: Vec<UnknownCondition>,
    /// Every change made to fit the API's limits.
    pub fixes: Vec<Fix>,
}

impl<C> Report<C> {
    /// A report of no adverse condition: what an empty `health_statuses` means.
    pub fn healthy() -> Self {
        Report {
            conditions: Vec::new(),
            unknown: Vec::new(),
            fixes: Vec::new(),
        }
    }

    /// True when the driver reported nothing adverse, known or unknown.
    pub fn is_healthy(&self) -> bool {
        self.conditions.is_empty() && self.unknown.is_empty()
    }
}

impl<C: Condition> Report<C> {
    /// The rank of the most severe condition (0 = most severe); a report without known
    /// conditions (a recovery) ranks after every condition.
    pub fn severity(&self) -> usize {
        self.conditions
            .iter()
            .map(Condition::rank)
            .min()
            .unwrap_or(usize::MAX)
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn unknown(raw_status: i32, reason: &str, message: &str) -> UnknownCondition {
    UnknownCondition {
        raw_status,
        reason: truncate_utf8(reason, MAX_REASON_BYTES),
        message: truncate_utf8(message, MAX_MESSAGE_BYTES),
    }
}

fn cap_unknown(mut unknown: Vec<UnknownCondition>, fixes: &mut Vec<Fix>) -> Vec<UnknownCondition> {
    unknown.sort_by(|a, b| (a.raw_status, &a.reason).cmp(&(b.raw_status, &b.reason)));
    unknown.dedup_by(|a, b| a.raw_status == b.raw_status && a.reason == b.reason);
    if unknown.len() > MAX_CONDITIONS {
        fixes.push(Fix::TooManyUnknown {
            dropped: unknown.len() - MAX_CONDITIONS,
        });
        unknown.truncate(MAX_CONDITIONS);
    }
    unknown
}

/// Maps `VolumeHealth.health_statuses` (from any of the three volume RPCs) to API conditions.
pub fn volume_report(entries: &[VolumeHealthEntry]) -> Report<VolumeHealthCondition> {
    let mut known = Vec::new();
    let mut unknowns = Vec::new();
    for e in entries {
        match VolumeStatus::from_csi(e.status) {
            Some(status) => known.push(VolumeHealthCondition {
                status: status.as_str().to_string(),
                reason: e.reason.clone(),
                message: non_empty(&e.message),
            }),
            None => unknowns.push(unknown(e.status, &e.reason, &e.message)),
        }
    }
    let (conditions, mut fixes) = sanitize(known);
    let unknown = cap_unknown(unknowns, &mut fixes);
    Report {
        conditions,
        unknown,
        fixes,
    }
}

/// The Kubernetes name of a CSI access mode, where Kubernetes has one.
pub fn access_mode_name(mode: Mode) -> Option<&'static str> {
    match mode {
        Mode::SingleNodeWriter | Mode::SingleNodeMultiWriter => Some("ReadWriteOnce"),
        Mode::MultiNodeReaderOnly => Some("ReadOnlyMany"),
        Mode::MultiNodeMultiWriter => Some("ReadWriteMany"),
        Mode::SingleNodeSingleWriter => Some("ReadWriteOncePod"),
        Mode::Unknown | Mode::SingleNodeReaderOnly | Mode::MultiNodeSingleWriter => None,
    }
}

/// The CSI access mode for a Kubernetes access mode name.
pub fn access_mode_from_name(name: &str) -> Option<Mode> {
    match name {
        "ReadWriteOnce" => Some(Mode::SingleNodeWriter),
        "ReadOnlyMany" => Some(Mode::MultiNodeReaderOnly),
        "ReadWriteMany" => Some(Mode::MultiNodeMultiWriter),
        "ReadWriteOncePod" => Some(Mode::SingleNodeSingleWriter),
        _ => None,
    }
}

/// Maps `NodeGetStorageHealthResponse.backend_health` to CSINode conditions, carrying the
/// volume capability's access mode and volume mode. `lastTransitionTime` is left for reconcile.
pub fn storage_report(entries: &[StorageBackendHealth]) -> Report<StorageHealthCondition> {
    let mut known = Vec::new();
    let mut unknowns = Vec::new();
    let mut fixes = Vec::new();
    for e in entries {
        let Some(status) = StorageStatus::from_csi(e.status) else {
            unknowns.push(unknown(e.status, &e.reason, &e.message));
            continue;
        };
        let cap = e.volume_capability.as_ref();
        let raw_mode = cap
            .and_then(|c| c.access_mode.as_ref())
            .map_or(0, |m| m.mode);
        let access_mode = match Mode::try_from(raw_mode) {
            Ok(Mode::Unknown) => None,
            Ok(mode) => access_mode_name(mode).map(str::to_string),
            Err(_) => None,
        };
        if raw_mode != 0 && access_mode.is_none() {
            fixes.push(Fix::AccessModeUnmapped {
                status: status.as_str().to_string(),
                csi_mode: raw_mode,
            });
        }
        let volume_mode = match cap.and_then(|c| c.access_type.as_ref()) {
            Some(AccessType::Block(_)) => Some("Block".to_string()),
            Some(AccessType::Mount(_)) => Some("Filesystem".to_string()),
            None => None,
        };
        known.push(StorageHealthCondition {
            status: status.as_str().to_string(),
            reason: e.reason.clone(),
            message: non_empty(&e.message),
            access_mode,
            volume_mode,
            last_transition_time: None,
        });
    }
    let (conditions, more) = sanitize(known);
    fixes.extend(more);
    let unknown = cap_unknown(unknowns, &mut fixes);
    Report {
        conditions,
        unknown,
        fixes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volhealth_csi_proto::v1::{VolumeCapability, volume_capability};

    fn entry(status: i32, reason: &str, message: &str) -> VolumeHealthEntry {
        VolumeHealthEntry {
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn maps_released_enum_values() {
        let r = volume_report(&[
            entry(1, "SlowIo", "p99 80ms"),
            entry(2, "VolumeNotFound", ""),
            entry(3, "Fsck", "x"),
        ]);
        let got: Vec<_> = r
            .conditions
            .iter()
            .map(|c| (c.status.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("Inaccessible", "VolumeNotFound"),
                ("DataLoss", "Fsck"),
                ("Degraded", "SlowIo")
            ]
        );
        assert_eq!(r.conditions[0].message, None);
        assert!(r.unknown.is_empty());
    }

    #[test]
    fn unknown_values_are_kept_apart_and_not_healthy() {
        let r = volume_report(&[entry(0, "Weird", ""), entry(42, "Future", "new value")]);
        assert!(r.conditions.is_empty());
        assert_eq!(r.unknown.len(), 2);
        assert!(!r.is_healthy());
    }

    #[test]
    fn storage_carries_access_and_volume_mode() {
        let cap = VolumeCapability {
            access_mode: Some(volume_capability::AccessMode {
                mode: Mode::MultiNodeMultiWriter as i32,
            }),
            access_type: Some(AccessType::Block(volume_capability::BlockVolume {})),
        };
        let r = storage_report(&[StorageBackendHealth {
            status: 2,
            reason: "NetworkPartition".into(),
            message: "no route".into(),
            volume_capability: Some(cap),
        }]);
        assert_eq!(r.conditions.len(), 1);
        let c = &r.conditions[0];
        assert_eq!(c.status, "StorageUnreachable");
        assert_eq!(c.access_mode.as_deref(), Some("ReadWriteMany"));
        assert_eq!(c.volume_mode.as_deref(), Some("Block"));
    }

    #[test]
    fn unmapped_access_mode_widens_and_is_reported() {
        let cap = VolumeCapability {
            access_mode: Some(volume_capability::AccessMode {
                mode: Mode::SingleNodeReaderOnly as i32,
            }),
            access_type: None,
        };
        let r = storage_report(&[StorageBackendHealth {
            status: 1,
            reason: "Slow".into(),
            message: String::new(),
            volume_capability: Some(cap),
        }]);
        assert_eq!(r.conditions[0].access_mode, None);
        assert_eq!(r.fixes[0].kind(), "access_mode_unmapped");
    }
}
