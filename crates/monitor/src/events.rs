//! Which Event a change of a claim's stored health deserves (transitions only).

use crate::claims::ClaimKey;
use crate::status_writer::{ClaimEvent, EventType};
use std::collections::BTreeSet;
use volhealth_model::{UnknownCondition, VolumeHealthCondition, VolumeHealthStatus};

/// Warning: conditions appeared on a healthy claim.
pub const REASON_DEGRADED: &str = "VolumeHealthDegraded";
/// Warning: the set of conditions (or a message) changed.
pub const REASON_CHANGED: &str = "VolumeConditionsChanged";
/// Normal: all conditions cleared.
pub const REASON_RECOVERED: &str = "VolumeHealthRecovered";
/// Warning: the driver sent a status value this version does not know.
pub const REASON_UNKNOWN: &str = "UnknownVolumeHealthCondition";

fn conditions(h: Option<&VolumeHealthStatus>) -> &[VolumeHealthCondition] {
    h.and_then(|h| h.health_conditions.as_deref())
        .unwrap_or(&[])
}

/// The (status, reason) pairs stored.
pub fn condition_keys(h: Option<&VolumeHealthStatus>) -> BTreeSet<(String, String)> {
    conditions(h)
        .iter()
        .map(|c| (c.status.clone(), c.reason.clone()))
        .collect()
}

fn describe(cs: &[VolumeHealthCondition]) -> String {
    cs.iter()
        .map(|c| match c.message.as_deref() {
            Some(m) if !m.is_empty() => format!("{}/{}: {}", c.status, c.reason, m),
            _ => format!("{}/{}", c.status, c.reason),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The Event for a stored change from `before` to `after`, if it is a transition.
pub fn transition_event(
    key: &ClaimKey,
    uid: &str,
    before: Option<&VolumeHealthStatus>,
    after: Option<&VolumeHealthStatus>,
) -> Option<ClaimEvent> {
    let (b, a) = (conditions(before), conditions(after));
    let as_set = |cs: &[VolumeHealthCondition]| -> BTreeSet<(String, String, String)> {
        cs.iter()
            .map(|c| {
                (
                    c.status.clone(),
                    c.reason.clone(),
                    c.message.clone().unwrap_or_default(),
                )
            })
            .collect()
    };
    let (event_type, reason, message) = match (b.is_empty(), a.is_empty()) {
        (true, false) => (
            EventType::Warning,
            REASON_DEGRADED,
            format!("Volume health conditions reported: {}", describe(a)),
        ),
        (false, true) => (
            EventType::Normal,
            REASON_RECOVERED,
            format!("Volume health conditions cleared (were: {})", describe(b)),
        ),
        (false, false) if as_set(a) != as_set(b) => (
            EventType::Warning,
            REASON_CHANGED,
            format!("Volume health conditions now: {}", describe(a)),
        ),
        _ => return None,
    };
    Some(ClaimEvent {
        key: key.clone(),
        uid: uid.to_string(),
        event_type,
        reason,
        message,
    })
}

/// The Warning for unknown status values the driver started reporting.
pub fn unknown_event(
    key: &ClaimKey,
    uid: &str,
    volume_id: &str,
    new: &[&UnknownCondition],
) -> ClaimEvent {
    let list = new
        .iter()
        .map(|u| format!("status {} reason {:?}", u.raw_status, u.reason))
        .collect::<Vec<_>>()
        .join("; ");
    ClaimEvent {
        key: key.clone(),
        uid: uid.to_string(),
        event_type: EventType::Warning,
        reason: REASON_UNKNOWN,
        message: format!(
            "The driver reported health values this monitor does not know for volume {volume_id} ({list}); they are not written to status and are not treated as healthy"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(cs: &[(&str, &str, &str)]) -> VolumeHealthStatus {
        VolumeHealthStatus {
            health_conditions: Some(
                cs.iter()
                    .map(|(s, r, m)| VolumeHealthCondition {
                        status: s.to_string(),
                        reason: r.to_string(),
                        message: Some(m.to_string()),
                    })
                    .collect(),
            ),
            last_transition_time: None,
        }
    }

    #[test]
    fn only_transitions_raise_events() {
        let k = ClaimKey {
            namespace: "ns".into(),
            name: "c".into(),
        };
        let deg = h(&[("Degraded", "Slow", "m")]);
        let e = transition_event(&k, "u", None, Some(&deg)).unwrap();
        assert_eq!(
            (e.event_type, e.reason),
            (EventType::Warning, REASON_DEGRADED)
        );
        let e = transition_event(&k, "u", Some(&deg), None).unwrap();
        assert_eq!(
            (e.event_type, e.reason),
            (EventType::Normal, REASON_RECOVERED)
        );
        let e =
            transition_event(&k, "u", Some(&deg), Some(&h(&[("DataLoss", "Gone", "m")]))).unwrap();
        assert_eq!(e.reason, REASON_CHANGED);
        let e = transition_event(
            &k,
            "u",
            Some(&deg),
            Some(&h(&[("Degraded", "Slow", "other")])),
        )
        .unwrap();
        assert_eq!(e.reason, REASON_CHANGED);
        assert_eq!(transition_event(&k, "u", Some(&deg), Some(&deg)), None);
        assert_eq!(transition_event(&k, "u", None, Some(&h(&[]))), None);
    }
}
