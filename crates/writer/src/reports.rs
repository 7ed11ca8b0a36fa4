//! What both writers do with a driver's report besides reconciling it: values this version does
//! not know are counted, logged and raised as a Warning Event once per transition (never treated
//! as healthy), and each change sanitising made to fit the API's limits is logged once.

use crate::events::{EventRecorder, ObjectRef, unknown_event};
use crate::metrics::WriterMetrics;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use volhealth_model::Report;

#[derive(Debug, Default)]
struct Seen {
    unknown: BTreeSet<(i32, String)>,
    fixes: BTreeSet<String>,
}

/// Per-object memory of unknown values and fixes already reported.
#[derive(Debug)]
pub struct ReportNotes {
    seen: Mutex<HashMap<String, Seen>>,
    metrics: Arc<WriterMetrics>,
    events: Arc<EventRecorder>,
}

impl ReportNotes {
    /// Notes counting into `metrics` and raising Events on `events`.
    pub fn new(metrics: Arc<WriterMetrics>, events: Arc<EventRecorder>) -> Self {
        ReportNotes {
            seen: Mutex::new(HashMap::new()),
            metrics,
            events,
        }
    }

    /// Notes `report` about `context` (e.g. `volume vol-1`) of `object`; `key` names the object
    /// and part uniquely (e.g. `pod ns/p volume data`).
    pub fn note<C>(&self, key: &str, object: &ObjectRef, context: &str, report: &Report<C>) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let entry = seen.entry(key.to_string()).or_default();
        let now: BTreeSet<(i32, String)> = report
            .unknown
            .iter()
            .map(|u| (u.raw_status, u.reason.clone()))
            .collect();
        let new: Vec<&(i32, String)> = now.difference(&entry.unknown).collect();
        if !new.is_empty() {
            for (status, _) in &new {
                self.metrics.unknown_condition(*status);
            }
            let what = new
                .iter()
                .map(|(s, r)| format!("status {s} reason {r:?}"))
                .collect::<Vec<_>>()
                .join("; ");
            tracing::warn!(object = %key, values = %what, "the driver reported health status values this version does not know; not written, not treated as healthy");
            self.events.record(unknown_event(object, context, &what));
        }
        entry.unknown = now;
        for fix in &report.fixes {
            let text = fix.to_string();
            if entry.fixes.insert(text.clone()) {
                tracing::warn!(object = %key, fix = %text, "trimmed the driver's report to fit the API's limits");
            }
        }
    }

    /// Forgets objects that no longer exist.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volhealth_csi::v1::volume_health::VolumeHealthEntry;

    #[test]
    fn unknown_values_are_raised_once_per_transition() {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = Arc::new(WriterMetrics::new(&mut registry));
        let events = Arc::new(EventRecorder::new(metrics.clone()));
        let notes = ReportNotes::new(metrics, events.clone());
        let object = ObjectRef {
            api_version: "v1",
            kind: "Pod",
            namespace: Some("ns".into()),
            name: "p".into(),
            uid: None,
        };
        let entry = |s: i32| VolumeHealthEntry {
            status: s,
            reason: "Future".into(),
            message: String::new(),
        };
        let r = volhealth_model::volume_report(&[entry(42)]);
        notes.note("pod ns/p volume v", &object, "volume v", &r);
        notes.note("pod ns/p volume v", &object, "volume v", &r);
        assert_eq!(events.len(), 1);
        notes.note(
            "pod ns/p volume v",
            &object,
            "volume v",
            &volhealth_model::Report::<volhealth_model::VolumeHealthCondition>::healthy(),
        );
        events.clear();
        notes.note("pod ns/p volume v", &object, "volume v", &r);
        assert_eq!(events.len(), 1, "a new transition raises it again");
        let text = volhealth_daemon::metrics_text::encode(&registry);
        assert!(
            text.contains(r#"csi_volume_health_unknown_condition_total{status="42"} 2"#),
            "{text}"
        );
    }
}
