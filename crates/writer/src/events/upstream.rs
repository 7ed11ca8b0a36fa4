//! Events in the upstream vocabulary, on request: the Go sidecar up to v0.18 and the kubelet
//! before v1.37 reported an abnormal volume as a Warning `VolumeConditionAbnormal` with the
//! driver's message, and alerts and dashboards built on them look for it.

use super::{EventType, HealthEvent, REASON_UPSTREAM_ABNORMAL, Subject, Transition};
use volhealth_model::sanitize::Condition;

/// Whether volume transitions also raise [`REASON_UPSTREAM_ABNORMAL`]; set once at start.
static UPSTREAM_REASONS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Makes every abnormal volume transition also raise the upstream Event
/// ([`REASON_UPSTREAM_ABNORMAL`]), for alerting and dashboards built on the Go components'
/// Events. Process-wide, like the command-line flag it stands for; the first call wins.
pub fn emit_upstream_reasons(on: bool) {
    let _ = UPSTREAM_REASONS.set(on);
}

fn upstream_reasons() -> bool {
    UPSTREAM_REASONS.get().copied().unwrap_or(false)
}

impl<C: Condition> Transition<'_, C> {
    /// The Events of this change: [`Transition::event`]'s, and for volume conditions that are
    /// abnormal after it, the upstream [`REASON_UPSTREAM_ABNORMAL`] beside it when
    /// [`emit_upstream_reasons`] is on.
    pub fn events(&self) -> Vec<HealthEvent> {
        self.events_with(upstream_reasons())
    }

    pub(super) fn events_with(&self, upstream: bool) -> Vec<HealthEvent> {
        let Some(primary) = self.event() else {
            return Vec::new();
        };
        let abnormal = upstream && self.subject == Subject::Volume && !self.after.is_empty();
        let mut out = vec![primary];
        if abnormal {
            // The upstream message is the driver's message itself.
            let message = self
                .after
                .iter()
                .map(|c| match c.message() {
                    Some(m) if !m.is_empty() => m.to_string(),
                    _ => format!("{}/{}", c.status(), c.reason()),
                })
                .collect::<Vec<_>>()
                .join("; ");
            let prefix = self.context.map(|c| format!("{c}: ")).unwrap_or_default();
            out.push(HealthEvent {
                object: self.object.clone(),
                event_type: EventType::Warning,
                reason: REASON_UPSTREAM_ABNORMAL,
                message: format!("{prefix}{message}"),
            });
        }
        out
    }
}
