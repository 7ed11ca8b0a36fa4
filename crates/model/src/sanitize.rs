//! Keeps driver reports within the API's limits without hiding an unhealthy volume.
//!
//! Limits (enforced by the API server): at most 16 conditions per list; reason non-empty,
//! CamelCase, at most 256 bytes; message at most 1024 bytes; `(status, reason)` unique per list.
//! Every change made here is returned as a [`Fix`] so callers can log and count it. When more
//! than 16 conditions remain, the most severe are kept, so at least one condition always
//! survives a non-empty report.

use crate::{StorageHealthCondition, VolumeHealthCondition};
use crate::{StorageStatus, VolumeStatus};
use std::collections::BTreeMap;
use std::fmt;

/// At most this many conditions per list.
pub const MAX_CONDITIONS: usize = 16;
/// At most this many bytes per reason.
pub const MAX_REASON_BYTES: usize = 256;
/// At most this many bytes per message.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// The reason used when a driver sends none.
pub const MISSING_REASON: &str = "Unspecified";

/// One change sanitising made to a driver's report.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Fix {
    /// The reason was empty (or had no letters or digits) and was replaced.
    ReasonMissing {
        /// Status of the condition.
        status: String,
    },
    /// The reason was not CamelCase and was rewritten.
    ReasonRewritten {
        /// Status of the condition.
        status: String,
        /// What the driver sent.
        from: String,
        /// What is written.
        to: String,
    },
    /// The reason was longer than 256 bytes and was cut.
    ReasonTruncated {
        /// Status of the condition.
        status: String,
        /// Length the driver sent, in bytes.
        original_len: usize,
    },
    /// The message was longer than 1024 bytes and was cut at a UTF-8 boundary.
    MessageTruncated {
        /// Status of the condition.
        status: String,
        /// Reason of the condition.
        reason: String,
        /// Length before cutting, in bytes.
        original_len: usize,
    },
    /// Two entries had the same `(status, reason)`; their messages were joined.
    DuplicateMerged {
        /// Status of the merged condition.
        status: String,
        /// Reason of the merged condition.
        reason: String,
    },
    /// Entries with the same `(status, reason)` named different access or volume modes; the
    /// merged condition applies to all modes, so no affected volume is left out.
    ScopeWidened {
        /// Status of the merged condition.
        status: String,
        /// Reason of the merged condition.
        reason: String,
    },
    /// A CSI access mode with no Kubernetes equivalent; the condition applies to all modes.
    AccessModeUnmapped {
        /// Status of the condition.
        status: String,
        /// The CSI `AccessMode.Mode` number.
        csi_mode: i32,
    },
    /// More than 16 conditions: the most severe were kept, these were left out.
    TooManyConditions {
        /// `(status, reason)` of every condition left out.
        dropped: Vec<(String, String)>,
    },
    /// More than 16 entries with unknown status values: only the first 16 are surfaced.
    TooManyUnknown {
        /// How many were left out.
        dropped: usize,
    },
}

impl Fix {
    /// A short stable name, for metric labels.
    pub fn kind(&self) -> &'static str {
        match self {
            Fix::ReasonMissing { .. } => "reason_missing",
            Fix::ReasonRewritten { .. } => "reason_rewritten",
            Fix::ReasonTruncated { .. } => "reason_truncated",
            Fix::MessageTruncated { .. } => "message_truncated",
            Fix::DuplicateMerged { .. } => "duplicate_merged",
            Fix::ScopeWidened { .. } => "scope_widened",
            Fix::AccessModeUnmapped { .. } => "access_mode_unmapped",
            Fix::TooManyConditions { .. } => "too_many_conditions",
            Fix::TooManyUnknown { .. } => "too_many_unknown",
        }
    }
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fix::ReasonMissing { status } => {
                write!(
                    f,
                    "{status} condition had no reason; wrote {MISSING_REASON:?}"
                )
            }
            Fix::ReasonRewritten { status, from, to } => {
                write!(f, "{status} reason {from:?} is not CamelCase; wrote {to:?}")
            }
            Fix::ReasonTruncated {
                status,
                original_len,
            } => write!(
                f,
                "{status} reason of {original_len} bytes cut to {MAX_REASON_BYTES}"
            ),
            Fix::MessageTruncated {
                status,
                reason,
                original_len,
            } => write!(
                f,
                "{status}/{reason} message of {original_len} bytes cut to {MAX_MESSAGE_BYTES}"
            ),
            Fix::DuplicateMerged { status, reason } => {
                write!(f, "duplicate {status}/{reason} entries merged into one")
            }
            Fix::ScopeWidened { status, reason } => write!(
                f,
                "{status}/{reason} reported for several access or volume modes; applies to all"
            ),
            Fix::AccessModeUnmapped { status, csi_mode } => write!(
                f,
                "{status} names CSI access mode {csi_mode}, which Kubernetes has no name for; applies to all access modes"
            ),
            Fix::TooManyConditions { dropped } => {
                let names: Vec<String> = dropped.iter().map(|(s, r)| format!("{s}/{r}")).collect();
                write!(
                    f,
                    "more than {MAX_CONDITIONS} conditions; kept the most severe, left out {}",
                    names.join(", ")
                )
            }
            Fix::TooManyUnknown { dropped } => write!(
                f,
                "more than {MAX_CONDITIONS} entries with unknown status; {dropped} not surfaced"
            ),
        }
    }
}

/// What sanitising needs to know of a condition type.
pub trait Condition: Clone {
    /// The status string.
    fn status(&self) -> &str;
    /// Severity rank of the status (0 is most severe).
    fn rank(&self) -> usize;
    /// The reason.
    fn reason(&self) -> &str;
    /// Replaces the reason.
    fn set_reason(&mut self, reason: String);
    /// The message, if any.
    fn message(&self) -> Option<&str>;
    /// Replaces the message.
    fn set_message(&mut self, message: Option<String>);
    /// Folds another condition's scope into this one; true when the scope had to widen.
    fn widen_scope(&mut self, _other: &Self) -> bool {
        false
    }
    /// The access mode and volume mode the condition is limited to (`None` = all).
    fn scope(&self) -> (Option<&str>, Option<&str>) {
        (None, None)
    }
}

/// The accessors of the two API condition types, whose fields are the same: `status`, `reason`,
/// `message`; `$vocabulary` ranks the status.
macro_rules! api_condition {
    ($vocabulary:ty) => {
        fn status(&self) -> &str {
            &self.status
        }
        fn rank(&self) -> usize {
            <$vocabulary>::rank_of(&self.status)
        }
        fn reason(&self) -> &str {
            &self.reason
        }
        fn set_reason(&mut self, reason: String) {
            self.reason = reason;
        }
        fn message(&self) -> Option<&str> {
            self.message.as_deref()
        }
        fn set_message(&mut self, message: Option<String>) {
            self.message = message;
        }
    };
}

impl Condition for VolumeHealthCondition {
    api_condition!(VolumeStatus);
}

impl Condition for StorageHealthCondition {
    api_condition!(StorageStatus);
    fn scope(&self) -> (Option<&str>, Option<&str>) {
        (self.access_mode.as_deref(), self.volume_mode.as_deref())
    }
    fn widen_scope(&mut self, other: &Self) -> bool {
        let mut widened = false;
        if self.access_mode != other.access_mode && self.access_mode.is_some() {
            self.access_mode = None;
            widened = true;
        }
        if self.volume_mode != other.volume_mode && self.volume_mode.is_some() {
            self.volume_mode = None;
            widened = true;
        }
        widened
    }
}

/// True when `reason` already meets the API's rule: an ASCII capital, then letters and digits.
pub fn is_camel_case(reason: &str) -> bool {
    let mut chars = reason.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric())
        && reason.len() <= MAX_REASON_BYTES
}

/// Rewrites any string as CamelCase: words split at anything that is not an ASCII letter or
/// digit, each word capitalised. A result that would start with a digit gets a `Reason` prefix.
/// An already valid reason comes back unchanged.
pub fn camel_case(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for word in raw.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "Reason");
    }
    out
}

/// Cuts `s` to at most `max` bytes at a UTF-8 boundary, ending with an ellipsis when cut.
pub fn truncate_utf8(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    const ELLIPSIS: &str = "\u{2026}";
    let mut end = max.saturating_sub(ELLIPSIS.len());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = s[..end].to_string();
    out.push_str(ELLIPSIS);
    out
}

fn fix_reason<C: Condition>(cond: &mut C, fixes: &mut Vec<Fix>) {
    let status = cond.status().to_string();
    let raw = cond.reason().to_string();
    let mut reason = camel_case(&raw);
    if reason.is_empty() {
        fixes.push(Fix::ReasonMissing {
            status: status.clone(),
        });
        reason = MISSING_REASON.to_string();
    } else if reason != raw {
        fixes.push(Fix::ReasonRewritten {
            status: status.clone(),
            from: truncate_utf8(&raw, MAX_REASON_BYTES),
            to: truncate_utf8(&reason, MAX_REASON_BYTES),
        });
    }
    if reason.len() > MAX_REASON_BYTES {
        fixes.push(Fix::ReasonTruncated {
            status,
            original_len: reason.len(),
        });
        // CamelCase output is ASCII, so any byte index is a character boundary.
        reason.truncate(MAX_REASON_BYTES);
    }
    cond.set_reason(reason);
}

/// Keeps the first of identical fixes: a report with many equal entries is reported once.
fn dedup_fixes(fixes: &mut Vec<Fix>) {
    let mut seen = std::collections::HashSet::new();
    fixes.retain(|f| seen.insert(f.clone()));
}

/// Applies the API limits to conditions mapped from one driver report. The result is sorted
/// most severe first, then by reason, so equal reports always produce equal lists.
pub fn sanitize<C: Condition>(conditions: Vec<C>) -> (Vec<C>, Vec<Fix>) {
    let mut fixes = Vec::new();
    let mut merged: BTreeMap<(usize, String, String), C> = BTreeMap::new();
    for mut cond in conditions {
        fix_reason(&mut cond, &mut fixes);
        if cond.message().is_some_and(str::is_empty) {
            cond.set_message(None);
        }
        let key = (
            cond.rank(),
            cond.status().to_string(),
            cond.reason().to_string(),
        );
        match merged.get_mut(&key) {
            None => {
                merged.insert(key, cond);
            }
            Some(existing) => {
                fixes.push(Fix::DuplicateMerged {
                    status: key.1.clone(),
                    reason: key.2.clone(),
                });
                // Joined messages stop growing once past the limit (they are cut to it below),
                // so N duplicates cost linear time, not quadratic.
                let joined = match (existing.message(), cond.message()) {
                    (Some(a), Some(b)) if a != b && a.len() <= MAX_MESSAGE_BYTES => {
                        Some(format!("{a}; {b}"))
                    }
                    (None, Some(b)) => Some(b.to_string()),
                    _ => None,
                };
                if let Some(m) = joined {
                    existing.set_message(Some(m));
                }
                if existing.widen_scope(&cond) {
                    fixes.push(Fix::ScopeWidened {
                        status: key.1,
                        reason: key.2,
                    });
                }
            }
        }
    }
    dedup_fixes(&mut fixes);
    let mut out: Vec<C> = merged.into_values().collect();
    for cond in &mut out {
        if let Some(msg) = cond.message()
            && msg.len() > MAX_MESSAGE_BYTES
        {
            fixes.push(Fix::MessageTruncated {
                status: cond.status().to_string(),
                reason: cond.reason().to_string(),
                original_len: msg.len(),
            });
            let cut = truncate_utf8(msg, MAX_MESSAGE_BYTES);
            cond.set_message(Some(cut));
        }
    }
    if out.len() > MAX_CONDITIONS {
        let dropped = out
            .split_off(MAX_CONDITIONS)
            .into_iter()
            .map(|c| (c.status().to_string(), c.reason().to_string()))
            .collect();
        fixes.push(Fix::TooManyConditions { dropped });
    }
    (out, fixes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::conditions::storage_condition;

    fn vc(status: &str, reason: &str, message: Option<&str>) -> VolumeHealthCondition {
        VolumeHealthCondition {
            status: status.into(),
            reason: reason.into(),
            message: message.map(Into::into),
        }
    }

    #[test]
    fn camel_case_rewrites_and_keeps_valid() {
        assert_eq!(camel_case("VolumeNotFound"), "VolumeNotFound");
        assert_eq!(camel_case("volume not found"), "VolumeNotFound");
        assert_eq!(camel_case("thin_pool-out.of.space"), "ThinPoolOutOfSpace");
        assert_eq!(camel_case("404 gone"), "Reason404Gone");
        assert_eq!(camel_case("  ---  "), "");
        assert_eq!(camel_case("défaillance disque"), "DFaillanceDisque");
        assert!(is_camel_case("VolumeNotFound"));
        assert!(!is_camel_case("volumeNotFound"));
        assert!(!is_camel_case(""));
    }

    #[test]
    fn truncate_respects_utf8_boundaries() {
        let s = "é".repeat(600); // 1200 bytes
        let cut = truncate_utf8(&s, MAX_MESSAGE_BYTES);
        assert!(cut.len() <= MAX_MESSAGE_BYTES);
        assert!(cut.ends_with('\u{2026}'));
        assert_eq!(truncate_utf8("short", 10), "short");
    }

    #[test]
    fn duplicates_merge_and_are_reported() {
        let (out, fixes) = sanitize(vec![
            vc("Degraded", "SlowIo", Some("p99 40ms")),
            vc("Degraded", "SlowIo", Some("p99 80ms")),
            vc("Inaccessible", "Gone", None),
        ]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].status, "Inaccessible");
        assert_eq!(out[1].message.as_deref(), Some("p99 40ms; p99 80ms"));
        assert_eq!(
            fixes,
            vec![Fix::DuplicateMerged {
                status: "Degraded".into(),
                reason: "SlowIo".into()
            }]
        );
    }

    #[test]
    fn many_equal_entries_merge_into_one_bounded_condition_and_one_fix() {
        let input: Vec<_> = (0..100_000)
            .map(|i| vc("Degraded", "SlowIo", Some(&format!("sample {i}"))))
            .collect();
        let (out, fixes) = sanitize(input);
        assert_eq!(out.len(), 1);
        assert!(
            out[0]
                .message
                .as_deref()
                .is_some_and(|m| m.len() <= MAX_MESSAGE_BYTES)
        );
        assert_eq!(
            fixes
                .iter()
                .filter(|f| f.kind() == "duplicate_merged")
                .count(),
            1
        );
    }

    #[test]
    fn over_limit_keeps_most_severe() {
        let mut input: Vec<_> = (0..20)
            .map(|i| vc("Degraded", &format!("R{i:02}"), None))
            .collect();
        input.push(vc("Inaccessible", "Zzz", None));
        let (out, fixes) = sanitize(input);
        assert_eq!(out.len(), MAX_CONDITIONS);
        assert_eq!(out[0].status, "Inaccessible");
        match &fixes[..] {
            [Fix::TooManyConditions { dropped }] => assert_eq!(dropped.len(), 5),
            other => panic!("unexpected fixes {other:?}"),
        }
    }

    #[test]
    fn empty_reason_is_replaced_not_dropped() {
        let (out, fixes) = sanitize(vec![vc("DataLoss", "", Some(""))]);
        assert_eq!(out, vec![vc("DataLoss", MISSING_REASON, None)]);
        assert_eq!(fixes[0].kind(), "reason_missing");
    }

    #[test]
    fn storage_scope_widens_on_merge() {
        let a = StorageHealthCondition {
            volume_mode: Some("Filesystem".into()),
            ..storage_condition("StorageDegraded", "PathDown", Some("ReadWriteMany"))
        };
        let mut b = a.clone();
        b.access_mode = Some("ReadWriteOnce".into());
        let (out, fixes) = sanitize(vec![a, b]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].access_mode, None);
        assert_eq!(out[0].volume_mode.as_deref(), Some("Filesystem"));
        assert!(fixes.iter().any(|f| f.kind() == "scope_widened"));
    }
}
