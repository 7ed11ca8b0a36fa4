//! The monitor's Prometheus metrics (names as the upstream sidecar and the KEP prototype use them).

use crate::claims::ClaimKey;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

/// Labels of `csi_volume_health_probe_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    /// The driver's name.
    pub driver_name: String,
    /// The RPC.
    pub method: String,
    /// `success` or `error`.
    pub result: String,
}

/// Labels of `csi_volume_health_probe_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    /// The driver's name.
    pub driver_name: String,
    /// The RPC.
    pub method: String,
}

/// Labels of `csi_controller_volume_health_status`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
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

/// Labels of `csi_volume_health_status_writes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `success`, `error` or `dropped`.
    pub result: String,
}

/// Labels of `csi_volume_health_unknown_condition_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnknownLabels {
    /// The raw numeric status the driver sent.
    pub status: String,
}

type HistogramFamily = Family<MethodLabels, Histogram, fn() -> Histogram>;

fn probe_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.5, 12))
}

/// All metrics of one monitor.
pub struct Metrics {
    registry: Registry,
    probe_total: Family<ProbeLabels, Counter>,
    probe_duration: HistogramFamily,
    status: Family<StatusLabels, Gauge>,
    writes_total: Family<ResultLabels, Counter>,
    writes_dropped: Counter,
    unknown_total: Family<UnknownLabels, Counter>,
    unmapped: Gauge,
    exported: Mutex<HashMap<ClaimKey, BTreeSet<(String, String)>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let probe_total = Family::<ProbeLabels, Counter>::default();
        let probe_duration: HistogramFamily = Family::new_with_constructor(probe_histogram);
        let status = Family::<StatusLabels, Gauge>::default();
        let writes_total = Family::<ResultLabels, Counter>::default();
        let writes_dropped = Counter::default();
        let unknown_total = Family::<UnknownLabels, Counter>::default();
        let unmapped = Gauge::default();
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "csi_volume_health_probe",
            "Controller health RPCs by result",
            probe_total.clone(),
        );
        registry.register(
            "csi_volume_health_probe_duration_seconds",
            "Latency of controller health RPCs (each list page separately)",
            probe_duration.clone(),
        );
        registry.register(
            "csi_controller_volume_health_status",
            "1 for each condition stored on a claim's status.healthStatus",
            status.clone(),
        );
        registry.register(
            "csi_volume_health_status_writes",
            "PVC status writes by result",
            writes_total.clone(),
        );
        registry.register(
            "csi_volume_health_writes_dropped",
            "PVC status writes the API server dropped or rejected (feature gate off?)",
            writes_dropped.clone(),
        );
        registry.register(
            "csi_volume_health_unknown_condition",
            "Health entries with a status this version does not know",
            unknown_total.clone(),
        );
        registry.register(
            "csi_volume_health_unmapped_volumes",
            "Volumes the driver reported in the last complete list cycle that have no bound PV",
            unmapped.clone(),
        );
        Metrics {
            registry,
            probe_total,
            probe_duration,
            status,
            writes_total,
            writes_dropped,
            unknown_total,
            unmapped,
            exported: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one RPC and its latency.
    pub fn probe(&self, driver_name: &str, method: &str, ok: bool, took: Duration) {
        let result = if ok { "success" } else { "error" };
        self.probe_total
            .get_or_create(&ProbeLabels {
                driver_name: driver_name.into(),
                method: method.into(),
                result: result.into(),
            })
            .inc();
        self.probe_duration
            .get_or_create(&MethodLabels {
                driver_name: driver_name.into(),
                method: method.into(),
            })
            .observe(took.as_secs_f64());
    }

    /// Counts one status write by result (`success`, `error`, `dropped`).
    pub fn write(&self, result: &str) {
        self.writes_total
            .get_or_create(&ResultLabels {
                result: result.into(),
            })
            .inc();
        if result == "dropped" {
            self.writes_dropped.inc();
        }
    }

    /// Counts one newly seen unknown status value.
    pub fn unknown_condition(&self, raw_status: i32) {
        self.unknown_total
            .get_or_create(&UnknownLabels {
                status: raw_status.to_string(),
            })
            .inc();
    }

    /// Sets the number of reported volumes without a bound PV.
    pub fn set_unmapped(&self, n: usize) {
        self.unmapped.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Makes the claim's status series exactly `conditions` ((status, reason) pairs); empty removes them all.
    pub fn set_claim_conditions(&self, key: &ClaimKey, conditions: BTreeSet<(String, String)>) {
        let Ok(mut exported) = self.exported.lock() else {
            return;
        };
        let old = exported.remove(key).unwrap_or_default();
        let labels = |(status, reason): &(String, String)| StatusLabels {
            namespace: key.namespace.clone(),
            persistentvolumeclaim: key.name.clone(),
            status: status.clone(),
            reason: reason.clone(),
        };
        for gone in old.difference(&conditions) {
            self.status.remove(&labels(gone));
        }
        for c in &conditions {
            self.status.get_or_create(&labels(c)).set(1);
        }
        if !conditions.is_empty() {
            exported.insert(key.clone(), conditions);
        }
    }

    /// The claims that currently have status series.
    pub fn exported_claims(&self) -> Vec<ClaimKey> {
        self.exported
            .lock()
            .map(|e| e.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        volhealth_daemon::metrics_text::encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_match_the_upstream_conventions() {
        let m = Metrics::new();
        m.probe(
            "d",
            "ControllerListVolumeHealth",
            true,
            Duration::from_millis(3),
        );
        m.write("dropped");
        m.unknown_condition(7);
        let key = ClaimKey {
            namespace: "ns".into(),
            name: "c".into(),
        };
        m.set_claim_conditions(&key, BTreeSet::from([("Degraded".into(), "Slow".into())]));
        let text = m.encode();
        for want in [
            r#"csi_volume_health_probe_total{driver_name="d",method="ControllerListVolumeHealth",result="success"} 1"#,
            r#"csi_volume_health_probe_duration_seconds_count{driver_name="d",method="ControllerListVolumeHealth"} 1"#,
            r#"csi_controller_volume_health_status{namespace="ns",persistentvolumeclaim="c",status="Degraded",reason="Slow"} 1"#,
            r#"csi_volume_health_status_writes_total{result="dropped"} 1"#,
            "csi_volume_health_writes_dropped_total 1",
            r#"csi_volume_health_unknown_condition_total{status="7"} 1"#,
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        m.set_claim_conditions(&key, BTreeSet::new());
        assert!(
            !m.encode().contains("persistentvolumeclaim=\"c\""),
            "series removed on recovery"
        );
    }
}
