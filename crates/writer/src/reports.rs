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

#[derive(Debug, Default)]
struct State {
    /// Objects whose reports carried an unknown value or a fix; an object that never did has
    /// no entry, so a writer of 5,000 healthy volumes keeps none.
    seen: HashMap<String, Seen>,
    /// How many entries of `seen` have unknown values in their last report.
    with_unknown: usize,
}

impl State {
    fn recount(&mut self) {
        self.with_unknown = self.seen.values().filter(|s| !s.unknown.is_empty()).count();
    }
}

/// Per-object memory of unknown values and fixes already reported.
#[derive(Debug)]
pub struct ReportNotes {
    state: Mutex<State>,
    metrics: Arc<WriterMetrics>,
    events: Arc<EventRecorder>,
}

impl ReportNotes {
    /// Notes counting into `metrics` and raising Events on `events`.
    pub fn new(metrics: Arc<WriterMetrics>, events: Arc<EventRecorder>) -> Self {
        ReportNotes {
            state: Mutex::new(State::default()),
            metrics,
            events,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether noting `report`, about any object, would change nothing: it carries no unknown
    /// value and no fix, and no object's last report carried an unknown value (whose end would
    /// be a transition). A caller can then skip building the key, object and context of
    /// [`ReportNotes::note`], as a Get sweep of healthy volumes does for every answer.
    pub fn is_quiet<C>(&self, report: &Report<C>) -> bool {
        report.unknown.is_empty() && report.fixes.is_empty() && self.state().with_unknown == 0
    }

    /// Notes `report` about `context` (e.g. `volume vol-1`) of `object`; `key` names the object
    /// and part uniquely (e.g. `pod ns/p volume data`).
    pub fn note<C>(&self, key: &str, object: &ObjectRef, context: &str, report: &Report<C>) {
        let mut state = self.state();
        if report.unknown.is_empty() && report.fixes.is_empty() {
            // Nothing new to say; only the end of unknown values is remembered.
            if let Some(entry) = state.seen.get_mut(key)
                && !entry.unknown.is_empty()
            {
                entry.unknown.clear();
                state.with_unknown -= 1;
            }
            return;
        }
        let entry = state.seen.entry(key.to_string()).or_default();
        let had_unknown = !entry.unknown.is_empty();
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
        let has_unknown = !entry.unknown.is_empty();
        match (had_unknown, has_unknown) {
            (false, true) => state.with_unknown += 1,
            (true, false) => state.with_unknown -= 1,
            _ => {}
        }
    }

    /// Forgets objects that no longer exist.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut state = self.state();
        state.seen.retain(|k, _| keep(k));
        state.recount();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volhealth_csi::v1::volume_health::VolumeHealthEntry;

    /// An object in namespace `ns`.
    fn object(kind: &'static str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1",
            kind,
            namespace: Some("ns".into()),
            name: name.into(),
            uid: None,
        }
    }

    #[test]
    fn unknown_values_are_raised_once_per_transition() {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = Arc::new(WriterMetrics::new(&mut registry));
        let events = Arc::new(EventRecorder::new(metrics.clone()));
        let notes = ReportNotes::new(metrics, events.clone());
        let object = object("Pod", "p");
        let entry = |s: i32| VolumeHealthEntry {
            status: s,
            reason: "Future".into(),
            message: String::new(),
        };
        let r = volhealth_model::volume_report(&[entry(42)]);
        let healthy = volhealth_model::Report::<volhealth_model::VolumeHealthCondition>::healthy();
        assert!(notes.is_quiet(&healthy), "nothing noted yet");
        assert!(!notes.is_quiet(&r));
        notes.note("pod ns/p volume v", &object, "volume v", &r);
        notes.note("pod ns/p volume v", &object, "volume v", &r);
        assert_eq!(events.len(), 1);
        assert!(
            !notes.is_quiet(&healthy),
            "a healthy report may end an object's unknown values"
        );
        notes.note("pod ns/p volume v", &object, "volume v", &healthy);
        assert!(notes.is_quiet(&healthy), "no object has unknown values now");
        events.clear();
        notes.note("pod ns/p volume v", &object, "volume v", &r);
        assert_eq!(events.len(), 1, "a new transition raises it again");
        let text = volhealth_daemon::metrics_text::encode(&registry);
        assert!(
            text.contains(r#"csi_volume_health_unknown_condition_total{status="42"} 2"#),
            "{text}"
        );
        notes.retain(|_| false);
        assert!(
            notes.is_quiet(&healthy),
            "a forgotten object has no unknown values"
        );
    }

    #[test]
    fn healthy_reports_keep_no_entry() {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = Arc::new(WriterMetrics::new(&mut registry));
        let events = Arc::new(EventRecorder::new(metrics.clone()));
        let notes = ReportNotes::new(metrics, events);
        let object = object("PersistentVolumeClaim", "c");
        let healthy = volhealth_model::Report::<volhealth_model::VolumeHealthCondition>::healthy();
        for i in 0..100 {
            notes.note(&format!("pvc ns/c{i}"), &object, "volume v", &healthy);
        }
        assert!(notes.state().seen.is_empty());
    }
}
