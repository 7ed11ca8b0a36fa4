//! The monitor's Prometheus metrics: the shared writer families, plus its own per-claim
//! condition series, unmapped volumes and incomplete list cycles.

use crate::claims::ClaimKey;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeSet;
use std::sync::Arc;
use volhealth_daemon::metrics_text::Families;
use volhealth_writer::{StatusSeries, WriterMetrics};

/// Labels of `csi_controller_volume_health_status`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct StatusLabels {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub persistentvolumeclaim: String,
    /// Inaccessible, DataLoss or Degraded.
    pub status: String,
    /// The condition's reason.
    pub reason: String,
}

/// Labels of `csi_volume_health_incomplete_cycles_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IncompleteLabels {
    /// Why the cycle was cut short: `page_failed`, `token_repeated`, `too_many_pages`, `too_long`.
    pub reason: String,
}

/// All metrics of one monitor.
pub struct Metrics {
    /// Every family, for the `/metrics` page and the tests.
    pub families: Families,
    /// The families both writers share.
    pub writer: Arc<WriterMetrics>,
    status: StatusSeries<ClaimKey, StatusLabels>,
    unmapped: Gauge,
    incomplete: Family<IncompleteLabels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    /// Registers every metric.
    fn default() -> Self {
        let mut registry = Registry::default();
        let writer = Arc::new(WriterMetrics::new(&mut registry));
        let status = StatusSeries::register(
            &mut registry,
            "csi_controller_volume_health_status",
            "1 for each condition stored on a claim's status.healthStatus",
        );
        let unmapped = Gauge::default();
        registry.register(
            "csi_volume_health_unmapped_volumes",
            "Volumes the driver reported in the last complete list cycle that have no bound PV",
            unmapped.clone(),
        );
        let incomplete = Family::<IncompleteLabels, Counter>::default();
        registry.register(
            "csi_volume_health_incomplete_cycles",
            "List cycles cut short (they write nothing from what they saw), by reason",
            incomplete.clone(),
        );
        Metrics {
            families: registry.into(),
            writer,
            status,
            unmapped,
            incomplete,
        }
    }
}

impl Metrics {
    /// Sets the number of reported volumes without a bound PV.
    pub fn set_unmapped(&self, n: usize) {
        self.unmapped.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts one list cycle cut short.
    pub fn incomplete_cycle(&self, reason: &str) {
        self.incomplete
            .get_or_create(&IncompleteLabels {
                reason: reason.into(),
            })
            .inc();
    }

    /// Makes the claim's status series exactly `conditions` ((status, reason) pairs); empty removes them all.
    pub fn set_claim_conditions(&self, key: &ClaimKey, conditions: BTreeSet<(String, String)>) {
        let labels = conditions
            .into_iter()
            .map(|(status, reason)| StatusLabels {
                namespace: key.namespace.clone(),
                persistentvolumeclaim: key.name.clone(),
                status,
                reason,
            })
            .collect();
        self.status.set(key, labels);
    }

    /// Removes the series of claims `keep` refuses.
    pub fn retain_claims(&self, keep: impl Fn(&ClaimKey) -> bool) {
        self.status.retain(keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn names_and_labels_match_the_upstream_conventions() {
        let m = Metrics::default();
        m.writer.probe(
            "d",
            "ControllerListVolumeHealth",
            true,
            Duration::from_millis(3),
        );
        m.writer.write("persistentvolumeclaims/status", "dropped");
        m.writer.unknown_condition(7);
        m.incomplete_cycle("too_many_pages");
        m.writer
            .cycle("d", "get", Duration::from_millis(950), false);
        m.writer
            .cycle("d", "get", Duration::from_millis(1200), true);
        let key = ClaimKey {
            namespace: "ns".into(),
            name: "c".into(),
        };
        m.set_claim_conditions(&key, BTreeSet::from([("Degraded".into(), "Slow".into())]));
        let text = m.families.encode();
        for want in [
            r#"csi_volume_health_probe_total{driver_name="d",method="ControllerListVolumeHealth",result="success"} 1"#,
            r#"csi_volume_health_probe_duration_seconds_count{driver_name="d",method="ControllerListVolumeHealth"} 1"#,
            r#"csi_controller_volume_health_status{namespace="ns",persistentvolumeclaim="c",status="Degraded",reason="Slow"} 1"#,
            r#"csi_volume_health_status_writes_total{resource="persistentvolumeclaims/status",result="dropped"} 1"#,
            r#"csi_volume_health_status_writes_dropped_total{resource="persistentvolumeclaims/status"} 1"#,
            r#"csi_volume_health_unknown_condition_total{status="7"} 1"#,
            r#"csi_volume_health_incomplete_cycles_total{reason="too_many_pages"} 1"#,
            r#"csi_volume_health_cycle_duration_seconds_count{driver_name="d",mode="get"} 2"#,
            r#"csi_volume_health_cycle_duration_seconds_bucket{le="1.0",driver_name="d",mode="get"} 1"#,
            r#"csi_volume_health_cycle_overruns_total{driver_name="d",mode="get"} 1"#,
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        m.set_claim_conditions(&key, BTreeSet::new());
        assert!(
            !m.families.encode().contains("persistentvolumeclaim=\"c\""),
            "series removed on recovery"
        );
    }
}
