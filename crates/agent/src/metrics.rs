//! The agent's Prometheus metrics.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

/// `method` label of NodeGetVolumeHealth.
pub const METHOD_VOLUME: &str = "NodeGetVolumeHealth";
/// `method` label of NodeGetStorageHealth.
pub const METHOD_STORAGE: &str = "NodeGetStorageHealth";

/// Labels of `csi_volume_health_probe_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    /// CSI driver.
    pub driver_name: String,
    /// RPC name.
    pub method: String,
    /// `success` or `error`.
    pub result: String,
}

/// Labels of `csi_volume_health_probe_duration_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DurationLabels {
    /// CSI driver.
    pub driver_name: String,
    /// RPC name.
    pub method: String,
}

/// Labels of `csi_node_volume_health_status`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct VolumeStatusLabels {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// `pod.spec.volumes` name.
    pub volume: String,
    /// Condition status.
    pub status: String,
    /// Condition reason.
    pub reason: String,
}

/// Labels of `csi_node_storage_health_status`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct StorageStatusLabels {
    /// CSI driver.
    pub driver_name: String,
    /// Condition status.
    pub status: String,
    /// Condition reason.
    pub reason: String,
}

/// Labels of `csi_volume_health_status_writes_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `pods/status`, `csinodes/status` or `csinodes`.
    pub resource: String,
    /// `success`, `rejected` (4xx), `dropped` (accepted but the field was not stored: gate off), `error`.
    pub result: String,
}

/// Labels of `csi_volume_health_unknown_condition_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnknownLabels {
    /// The numeric status this version does not know.
    pub status: String,
}

type VolumeKey = (String, String, String);

/// All metrics, with the bookkeeping that removes status series on recovery.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    probes: Family<ProbeLabels, Counter>,
    durations: Family<DurationLabels, Histogram, fn() -> Histogram>,
    volume_status: Family<VolumeStatusLabels, Gauge>,
    storage_status: Family<StorageStatusLabels, Gauge>,
    writes: Family<WriteLabels, Counter>,
    unknown: Family<UnknownLabels, Counter>,
    volume_series: Mutex<BTreeMap<VolumeKey, BTreeSet<VolumeStatusLabels>>>,
    storage_series: Mutex<BTreeMap<String, BTreeSet<StorageStatusLabels>>>,
}

fn duration_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0,
    ])
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let probes = Family::<ProbeLabels, Counter>::default();
        let durations =
            Family::<DurationLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram as fn() -> Histogram,
            );
        let volume_status = Family::<VolumeStatusLabels, Gauge>::default();
        let storage_status = Family::<StorageStatusLabels, Gauge>::default();
        let writes = Family::<WriteLabels, Counter>::default();
        let unknown = Family::<UnknownLabels, Counter>::default();
        registry.register(
            "csi_volume_health_probe",
            "CSI node health RPCs made, by result",
            probes.clone(),
        );
        registry.register(
            "csi_volume_health_probe_duration_seconds",
            "Duration of CSI node health RPCs",
            durations.clone(),
        );
        registry.register(
            "csi_node_volume_health_status",
            "1 while a pod volume has this health condition on this node",
            volume_status.clone(),
        );
        registry.register(
            "csi_node_storage_health_status",
            "1 while a driver reports this storage backend condition on this node",
            storage_status.clone(),
        );
        registry.register(
            "csi_volume_health_status_writes",
            "Status writes of the agent, by resource and result",
            writes.clone(),
        );
        registry.register(
            "csi_volume_health_unknown_condition",
            "Health entries with a status number this version does not know (never treated as healthy)",
            unknown.clone(),
        );
        Metrics {
            registry,
            probes,
            durations,
            volume_status,
            storage_status,
            writes,
            unknown,
            volume_series: Mutex::new(BTreeMap::new()),
            storage_series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records one RPC.
    pub fn probe(&self, driver: &str, method: &str, ok: bool, took: Duration) {
        let result = if ok { "success" } else { "error" };
        self.probes
            .get_or_create(&ProbeLabels {
                driver_name: driver.to_string(),
                method: method.to_string(),
                result: result.to_string(),
            })
            .inc();
        self.durations
            .get_or_create(&DurationLabels {
                driver_name: driver.to_string(),
                method: method.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// Records one status write.
    pub fn write(&self, resource: &str, result: &str) {
        self.writes
            .get_or_create(&WriteLabels {
                resource: resource.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// Records an entry with an unknown status number.
    pub fn unknown_condition(&self, raw_status: i32) {
        self.unknown
            .get_or_create(&UnknownLabels {
                status: raw_status.to_string(),
            })
            .inc();
    }

    /// Sets the series of one pod volume to exactly `conditions` (status, reason).
    pub fn set_volume(
        &self,
        namespace: &str,
        pod: &str,
        volume: &str,
        conditions: &[(String, String)],
    ) {
        let new: BTreeSet<VolumeStatusLabels> = conditions
            .iter()
            .map(|(status, reason)| VolumeStatusLabels {
                namespace: namespace.to_string(),
                pod: pod.to_string(),
                volume: volume.to_string(),
                status: status.clone(),
                reason: reason.clone(),
            })
            .collect();
        let Ok(mut series) = self.volume_series.lock() else {
            return;
        };
        let key = (namespace.to_string(), pod.to_string(), volume.to_string());
        let old = series.remove(&key).unwrap_or_default();
        for gone in old.difference(&new) {
            self.volume_status.remove(gone);
        }
        for labels in &new {
            self.volume_status.get_or_create(labels).set(1);
        }
        if !new.is_empty() {
            series.insert(key, new);
        }
    }

    /// Removes the series of every volume of a pod that is gone.
    pub fn forget_pod(&self, namespace: &str, pod: &str) {
        let Ok(mut series) = self.volume_series.lock() else {
            return;
        };
        let keys: Vec<VolumeKey> = series
            .keys()
            .filter(|(ns, p, _)| ns == namespace && p == pod)
            .cloned()
            .collect();
        for key in keys {
            for labels in series.remove(&key).unwrap_or_default() {
                self.volume_status.remove(&labels);
            }
        }
    }

    /// Sets a driver's storage series; when its conditions change, all its old series go first.
    pub fn set_storage(&self, driver: &str, conditions: &[(String, String)]) {
        let new: BTreeSet<StorageStatusLabels> = conditions
            .iter()
            .map(|(status, reason)| StorageStatusLabels {
                driver_name: driver.to_string(),
                status: status.clone(),
                reason: reason.clone(),
            })
            .collect();
        let Ok(mut series) = self.storage_series.lock() else {
            return;
        };
        let old = series.remove(driver).unwrap_or_default();
        if old != new {
            for labels in &old {
                self.storage_status.remove(labels);
            }
        }
        for labels in &new {
            self.storage_status.get_or_create(labels).set(1);
        }
        if !new.is_empty() {
            series.insert(driver.to_string(), new);
        }
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        volhealth_daemon::metrics_text::encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str, r: &str) -> (String, String) {
        (s.to_string(), r.to_string())
    }

    #[test]
    fn volume_series_follow_conditions() {
        let m = Metrics::new();
        m.set_volume(
            "ns",
            "p",
            "data",
            &[c("Degraded", "Slow"), c("DataLoss", "Bad")],
        );
        let text = m.encode();
        assert!(text.contains(
            r#"csi_node_volume_health_status{namespace="ns",pod="p",volume="data",status="Degraded",reason="Slow"} 1"#
        ));
        m.set_volume("ns", "p", "data", &[c("DataLoss", "Bad")]);
        let text = m.encode();
        assert!(!text.contains("Slow"), "{text}");
        assert!(text.contains(r#"reason="Bad"} 1"#));
        m.forget_pod("ns", "p");
        assert!(!m.encode().contains("reason=\"Bad\""));
    }

    #[test]
    fn storage_series_are_removed_on_recovery() {
        let m = Metrics::new();
        m.set_storage("d", &[c("StorageUnreachable", "Net")]);
        assert!(m.encode().contains(
            r#"csi_node_storage_health_status{driver_name="d",status="StorageUnreachable",reason="Net"} 1"#
        ));
        m.set_storage("d", &[]);
        assert!(!m.encode().contains("reason=\"Net\""));
    }

    #[test]
    fn probe_counters_have_upstream_names() {
        let m = Metrics::new();
        m.probe("d", METHOD_VOLUME, false, Duration::from_millis(3));
        let text = m.encode();
        assert!(text.contains(
            r#"csi_volume_health_probe_total{driver_name="d",method="NodeGetVolumeHealth",result="error"} 1"#
        ));
        assert!(text.contains("csi_volume_health_probe_duration_seconds_bucket{"));
    }
}
