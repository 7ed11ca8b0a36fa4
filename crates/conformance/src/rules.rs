//! The rules every health entry must follow, as pure functions that name the rule they find broken.

use std::collections::HashSet;

use volhealth_csi::v1;

/// Longest `reason` allowed, in bytes (the KEP's condition reason limit).
pub const MAX_REASON_BYTES: usize = 256;
/// Longest `message` allowed, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// API spelling of a `VolumeHealthErrorType` number, or `None` for an unknown one (0 included).
pub fn volume_status_name(n: i32) -> Option<&'static str> {
    match n {
        1 => Some("Degraded"),
        2 => Some("Inaccessible"),
        3 => Some("DataLoss"),
        _ => None,
    }
}

/// API spelling of a `StorageHealthErrorType` number, or `None` for an unknown one (0 included).
pub fn storage_status_name(n: i32) -> Option<&'static str> {
    match n {
        1 => Some("StorageDegraded"),
        2 => Some("StorageUnreachable"),
        _ => None,
    }
}

/// The number of a status in API spelling, for volume (`Inaccessible`...) or storage statuses.
pub fn status_number(name: &str) -> Option<i32> {
    match name {
        "Degraded" | "StorageDegraded" => Some(1),
        "Inaccessible" | "StorageUnreachable" => Some(2),
        "DataLoss" => Some(3),
        _ => None,
    }
}

/// What is wrong with a reason: empty, not CamelCase, or too long.
pub fn reason_problem(reason: &str) -> Option<String> {
    if reason.is_empty() {
        return Some("reason is empty (a reason MUST be a non-empty CamelCase word)".into());
    }
    if reason.len() > MAX_REASON_BYTES {
        return Some(format!(
            "reason is {} bytes, longer than the {MAX_REASON_BYTES}-byte limit",
            reason.len()
        ));
    }
    let mut chars = reason.chars();
    let camel = chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric());
    if !camel {
        return Some(format!(
            "reason {:?} is not CamelCase (an upper-case letter, then letters and digits)",
            shorten(reason)
        ));
    }
    None
}

/// What is wrong with a message: too long.
pub fn message_problem(message: &str) -> Option<String> {
    (message.len() > MAX_MESSAGE_BYTES).then(|| {
        format!(
            "message is {} bytes, longer than the {MAX_MESSAGE_BYTES}-byte limit",
            message.len()
        )
    })
}

/// Volume health entries whose status is not a known `VolumeHealthErrorType`.
pub fn unknown_volume_statuses(vh: &v1::VolumeHealth) -> Vec<String> {
    vh.health_statuses
        .iter()
        .filter(|e| volume_status_name(e.status).is_none())
        .map(|e| {
            format!(
                "volume {:?}: status {} is not a known VolumeHealthErrorType (1 Degraded, 2 Inaccessible, 3 DataLoss)",
                vh.volume_id, e.status
            )
        })
        .collect()
}

/// Reasons breaking the format rules, per volume.
pub fn bad_volume_reasons(vh: &v1::VolumeHealth) -> Vec<String> {
    entry_problems(vh, |e| reason_problem(&e.reason))
}

/// Messages breaking the length rule, per volume.
pub fn bad_volume_messages(vh: &v1::VolumeHealth) -> Vec<String> {
    entry_problems(vh, |e| message_problem(&e.message))
}

/// What `problem` finds in each entry of a volume's report, naming the volume.
fn entry_problems(
    vh: &v1::VolumeHealth,
    problem: impl Fn(&v1::volume_health::VolumeHealthEntry) -> Option<String>,
) -> Vec<String> {
    vh.health_statuses
        .iter()
        .filter_map(problem)
        .map(|p| format!("volume {:?}: {p}", vh.volume_id))
        .collect()
}

/// Repeated (status, reason) pairs within one volume's report.
pub fn duplicate_volume_entries(vh: &v1::VolumeHealth) -> Vec<String> {
    let mut seen = HashSet::new();
    vh.health_statuses
        .iter()
        .filter(|e| !seen.insert((e.status, e.reason.clone())))
        .map(|e| {
            format!(
                "volume {:?}: (status {}, reason {:?}) appears more than once",
                vh.volume_id,
                e.status,
                shorten(&e.reason)
            )
        })
        .collect()
}

/// Everything wrong with one NodeGetStorageHealth report.
pub fn storage_problems(
    entries: &[v1::node_get_storage_health_response::StorageBackendHealth],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = HashSet::new();
    for e in entries {
        if storage_status_name(e.status).is_none() {
            problems.push(format!(
                "storage status {} is not a known StorageHealthErrorType (1 StorageDegraded, 2 StorageUnreachable)",
                e.status
            ));
        }
        if let Some(p) = reason_problem(&e.reason) {
            problems.push(format!("storage entry: {p}"));
        }
        if let Some(p) = message_problem(&e.message) {
            problems.push(format!("storage entry: {p}"));
        }
        let capability = e.volume_capability.as_ref().map(|c| format!("{c:?}"));
        if !seen.insert((e.status, e.reason.clone(), capability)) {
            problems.push(format!(
                "storage entry (status {}, reason {:?}, volume capability) appears more than once",
                e.status,
                shorten(&e.reason)
            ));
        }
    }
    problems
}

/// At most 60 characters of `s`, for messages about over-long or odd values.
pub fn shorten(s: &str) -> String {
    if s.chars().count() <= 60 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(60).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(status: i32, reason: &str) -> v1::volume_health::VolumeHealthEntry {
        v1::volume_health::VolumeHealthEntry {
            status,
            reason: reason.into(),
            message: String::new(),
        }
    }

    #[test]
    fn reasons_must_be_camel_case_and_bounded() {
        assert_eq!(reason_problem("VolumeNotFound"), None);
        assert_eq!(reason_problem("Io2Slow"), None);
        for bad in [
            "",
            "volumeNotFound",
            "Volume not found",
            "Volume-Gone",
            "Ünicode",
        ] {
            assert!(reason_problem(bad).is_some(), "{bad:?} accepted");
        }
        let long = format!("A{}", "b".repeat(MAX_REASON_BYTES));
        assert!(
            reason_problem(&long)
                .expect("too long")
                .contains("256-byte")
        );
        assert!(reason_problem(&"A".repeat(MAX_REASON_BYTES)).is_none());
    }

    #[test]
    fn statuses_duplicates_and_messages() {
        let vh = v1::VolumeHealth {
            volume_id: "v".into(),
            health_statuses: vec![
                entry(1, "Slow"),
                entry(1, "Slow"),
                entry(2, "Slow"),
                entry(0, "X"),
                entry(9, "Y"),
            ],
        };
        assert_eq!(duplicate_volume_entries(&vh).len(), 1);
        assert_eq!(unknown_volume_statuses(&vh).len(), 2);
        assert!(message_problem(&"m".repeat(MAX_MESSAGE_BYTES)).is_none());
        assert!(message_problem(&"m".repeat(MAX_MESSAGE_BYTES + 1)).is_some());
    }

    #[test]
    fn storage_duplicates_count_the_capability() {
        use v1::node_get_storage_health_response::StorageBackendHealth;
        let mk = |cap: Option<v1::VolumeCapability>| StorageBackendHealth {
            status: 2,
            reason: "NetworkPartition".into(),
            message: String::new(),
            volume_capability: cap,
        };
        let block = v1::VolumeCapability {
            access_type: Some(v1::volume_capability::AccessType::Block(Default::default())),
            access_mode: None,
        };
        assert!(storage_problems(&[mk(None), mk(Some(block))]).is_empty());
        assert_eq!(storage_problems(&[mk(None), mk(None)]).len(), 1);
    }

    #[test]
    fn status_names_round_trip() {
        for name in ["Degraded", "Inaccessible", "DataLoss"] {
            assert_eq!(status_number(name).and_then(volume_status_name), Some(name));
        }
        for name in ["StorageDegraded", "StorageUnreachable"] {
            assert_eq!(
                status_number(name).and_then(storage_status_name),
                Some(name)
            );
        }
    }
}
