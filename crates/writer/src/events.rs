//! Events about health transitions, for all three objects: which change deserves one, with
//! which reason and message. The recorder that sends them on a budget of their own (so status
//! writes never wait behind them), coalescing and aggregating, and the sink it sends through are
//! Kubernetes plumbing in `volhealth-kube-access`, re-exported here; the writers count its
//! outcomes in [`WriterMetrics`]' `volhealth_events_total`.

use crate::metrics::WriterMetrics;
use volhealth_model::same_conditions;
use volhealth_model::sanitize::Condition;
use volhealth_model::{VolumeHealthCondition, VolumeHealthStatus, claim_conditions};

pub use volhealth_kube_access::events::{
    AGGREGATE_AFTER, EVENT_BURST, EVENT_QPS, EventCounter, EventRecorder, EventSink, EventType,
    HealthEvent, KubeEventSink, MAX_PENDING_EVENTS, ObjectRef, Outgoing,
};

/// Warning: conditions appeared on a healthy volume.
pub const REASON_VOLUME_DEGRADED: &str = "VolumeHealthDegraded";
/// Warning: a volume's conditions (or a message) changed.
pub const REASON_VOLUME_CHANGED: &str = "VolumeConditionsChanged";
/// Normal: all of a volume's conditions cleared.
pub const REASON_VOLUME_RECOVERED: &str = "VolumeHealthRecovered";
/// Warning: conditions appeared on a healthy storage backend.
pub const REASON_STORAGE_DEGRADED: &str = "StorageHealthDegraded";
/// Warning: a backend's conditions (or a message) changed.
pub const REASON_STORAGE_CHANGED: &str = "StorageConditionsChanged";
/// Normal: all of a backend's conditions cleared.
pub const REASON_STORAGE_RECOVERED: &str = "StorageHealthRecovered";
/// Warning: the driver sent a status value this version does not know.
pub const REASON_UNKNOWN: &str = "UnknownVolumeHealthCondition";
/// Warning, only with `--upstream-event-reasons`: a volume is abnormal, with the driver's
/// message, as the upstream sidecar up to v0.18 and the kubelet before v1.37 reported it.
pub const REASON_UPSTREAM_ABNORMAL: &str = "VolumeConditionAbnormal";

/// Warning, once per run: the API server accepts health writes but drops the field (its
/// `CSIVolumeHealth` feature gate is off), so no object shows health.
pub const REASON_FIELD_DROPPED: &str = "HealthStatusNotStored";

/// Every reason the writers' Events carry (docs/kubectl.md lists exactly these).
pub const ALL_REASONS: [&str; 9] = [
    REASON_FIELD_DROPPED,
    REASON_VOLUME_DEGRADED,
    REASON_VOLUME_CHANGED,
    REASON_VOLUME_RECOVERED,
    REASON_STORAGE_DEGRADED,
    REASON_STORAGE_CHANGED,
    REASON_STORAGE_RECOVERED,
    REASON_UNKNOWN,
    REASON_UPSTREAM_ABNORMAL,
];

/// Which vocabulary a condition list uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// Volume conditions (PVC, pod volume).
    Volume,
    /// Storage backend conditions (CSINode driver entry).
    Storage,
}

fn describe<C: Condition>(cs: &[C]) -> String {
    cs.iter()
        .map(|c| match c.message() {
            Some(m) if !m.is_empty() => format!("{}/{}: {}", c.status(), c.reason(), m),
            _ => format!("{}/{}", c.status(), c.reason()),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A stored change of one condition list of one object, from `before` to `after`: what its
/// Events are made of.
pub struct Transition<'a, C> {
    /// The object whose list changed.
    pub object: &'a ObjectRef,
    /// Whether the list is volume or storage health.
    pub subject: Subject,
    /// The part of the object (`volume data`, `driver x`), if any.
    pub context: Option<&'a str>,
    /// The list as stored before.
    pub before: &'a [C],
    /// The list as stored now.
    pub after: &'a [C],
}

impl<'a> Transition<'a, VolumeHealthCondition> {
    /// The change of a claim's `status.healthStatus` from `before` to `after` (no
    /// `healthStatus` and one with no conditions are the same).
    pub fn claim(
        object: &'a ObjectRef,
        before: &'a Option<VolumeHealthStatus>,
        after: &'a Option<VolumeHealthStatus>,
    ) -> Self {
        Transition {
            object,
            subject: Subject::Volume,
            context: None,
            before: claim_conditions(before.as_ref()),
            after: claim_conditions(after.as_ref()),
        }
    }
}

impl<C: Condition> Transition<'_, C> {
    /// The Event for this change, if it is a transition (by the same rule that decides whether
    /// anything is written).
    pub fn event(&self) -> Option<HealthEvent> {
        let (before, after) = (self.before, self.after);
        if same_conditions(before, after) {
            return None;
        }
        let (degraded, changed, recovered, noun) = match self.subject {
            Subject::Volume => (
                REASON_VOLUME_DEGRADED,
                REASON_VOLUME_CHANGED,
                REASON_VOLUME_RECOVERED,
                "Volume health",
            ),
            Subject::Storage => (
                REASON_STORAGE_DEGRADED,
                REASON_STORAGE_CHANGED,
                REASON_STORAGE_RECOVERED,
                "Storage health",
            ),
        };
        let prefix = self.context.map(|c| format!("{c}: ")).unwrap_or_default();
        let (event_type, reason, message) = match (before.is_empty(), after.is_empty()) {
            (true, _) => (
                EventType::Warning,
                degraded,
                format!("{prefix}{noun} conditions reported: {}", describe(after)),
            ),
            (false, true) => (
                EventType::Normal,
                recovered,
                format!(
                    "{prefix}{noun} conditions cleared (were: {})",
                    describe(before)
                ),
            ),
            (false, false) => (
                EventType::Warning,
                changed,
                format!("{prefix}{noun} conditions now: {}", describe(after)),
            ),
        };
        Some(HealthEvent {
            object: self.object.clone(),
            event_type,
            reason,
            message,
        })
    }
}

/// The one Warning saying that the API server drops the health field of `resource` (on the
/// first object whose write it dropped).
pub fn field_dropped_event(object: &ObjectRef, resource: &str) -> HealthEvent {
    HealthEvent {
        object: object.clone(),
        event_type: EventType::Warning,
        reason: REASON_FIELD_DROPPED,
        message: format!(
            "The API server accepted the write of {resource} but did not store the health field: its CSIVolumeHealth feature gate is off, so no object shows volume health until it is turned on (--feature-gates=CSIVolumeHealth=true). Writes continue slowly and resume when it is"
        ),
    }
}

/// The Warning for status values this version does not know (`what` lists them).
pub fn unknown_event(object: &ObjectRef, context: &str, what: &str) -> HealthEvent {
    HealthEvent {
        object: object.clone(),
        event_type: EventType::Warning,
        reason: REASON_UNKNOWN,
        message: format!(
            "The driver reported health values this version does not know for {context} ({what}); they are not written to status and are not treated as healthy"
        ),
    }
}

impl EventCounter for WriterMetrics {
    fn event(&self, reason: &str, result: &str) {
        WriterMetrics::event(self, reason, result);
    }
}

mod upstream;
pub use upstream::emit_upstream_reasons;

#[cfg(test)]
mod tests;
