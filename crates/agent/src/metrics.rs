//! The agent's Prometheus metrics: the shared writer families, plus its per-pod-volume and
//! per-driver condition series.

use k8s_openapi::api::core::v1::PodVolumeHealth;
use k8s_openapi::api::storage::v1::StorageHealthCondition;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;
use std::collections::BTreeSet;
use std::sync::Arc;
use volhealth_daemon::metrics_text::Families;

use volhealth_writer::{StatusSeries, WriterMetrics};

/// `method` label of NodeGetVolumeHealth.
pub const METHOD_VOLUME: &str = volhealth_writer::probe::method::NODE_VOLUME;
/// `method` label of NodeGetStorageHealth.
pub const METHOD_STORAGE: &str = volhealth_writer::probe::method::NODE_STORAGE;

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

type VolumeKey = (String, String, String);

/// All metrics of one agent.
#[derive(Debug)]
pub struct Metrics {
    /// Every family, for the `/metrics` page and the tests.
    pub families: Families,
    /// The families both writers share.
    pub writer: Arc<WriterMetrics>,
    /// The node fault detector's series.
    pub node_faults: Arc<volhealth_node_faults::NodeFaultMetrics>,
    volume_status: StatusSeries<VolumeKey, VolumeStatusLabels>,
    storage_status: StatusSeries<String, StorageStatusLabels>,
}

impl Default for Metrics {
    /// Creates and registers every metric.
    fn default() -> Self {
        let mut registry = Registry::default();
        let writer = Arc::new(WriterMetrics::new(&mut registry));
        let node_faults = Arc::new(volhealth_node_faults::NodeFaultMetrics::register(
            &mut registry,
        ));
        let volume_status = StatusSeries::register(
            &mut registry,
            "csi_node_volume_health_status",
            "1 while a pod volume has this health condition on this node",
        );
        let storage_status = StatusSeries::register(
            &mut registry,
            "csi_node_storage_health_status",
            "1 while a driver reports this storage backend condition on this node",
        );
        Metrics {
            families: registry.into(),
            writer,
            node_faults,
            volume_status,
            storage_status,
        }
    }
}

impl Metrics {
    /// Records one status write.
    pub fn write(&self, resource: &str, result: &str) {
        self.writer.write(resource, result);
    }

    /// Sets the series of one pod volume to exactly `conditions` (status, reason).
    pub fn set_volume(
        &self,
        namespace: &str,
        pod: &str,
        volume: &str,
        conditions: &[(String, String)],
    ) {
        let labels = conditions
            .iter()
            .map(|(status, reason)| VolumeStatusLabels {
                namespace: namespace.to_string(),
                pod: pod.to_string(),
                volume: volume.to_string(),
                status: status.clone(),
                reason: reason.clone(),
            })
            .collect();
        let key = (namespace.to_string(), pod.to_string(), volume.to_string());
        self.volume_status.set(&key, labels);
    }

    /// Makes a pod's series follow its stored `volumeHealth` list.
    pub fn set_pod(&self, namespace: &str, pod: &str, list: &[PodVolumeHealth]) {
        let listed: BTreeSet<&str> = list.iter().map(|e| e.name.as_str()).collect();
        self.volume_status
            .retain(|(ns, p, v)| !(ns == namespace && p == pod && !listed.contains(v.as_str())));
        for entry in list {
            let conditions: Vec<(String, String)> = entry
                .health_conditions
                .iter()
                .flatten()
                .map(|c| (c.status.clone(), c.reason.clone()))
                .collect();
            self.set_volume(namespace, pod, &entry.name, &conditions);
        }
    }

    /// Removes the series of every volume of a pod that is gone.
    pub fn forget_pod(&self, namespace: &str, pod: &str) {
        self.volume_status
            .retain(|(ns, p, _)| !(ns == namespace && p == pod));
    }

    /// Sets a driver's storage series to exactly `conditions` (status, reason).
    pub fn set_storage(&self, driver: &str, conditions: &[(String, String)]) {
        let labels = conditions
            .iter()
            .map(|(status, reason)| StorageStatusLabels {
                driver_name: driver.to_string(),
                status: status.clone(),
                reason: reason.clone(),
            })
            .collect();
        self.storage_status.set(&driver.to_string(), labels);
    }

    /// Sets a driver's storage series from its stored conditions.
    pub fn set_storage_conditions(&self, driver: &str, conditions: &[StorageHealthCondition]) {
        let pairs: Vec<(String, String)> = conditions
            .iter()
            .map(|c| (c.status.clone(), c.reason.clone()))
            .collect();
        self.set_storage(driver, &pairs);
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
        let m = Metrics::default();
        m.set_volume(
            "ns",
            "p",
            "data",
            &[c("Degraded", "Slow"), c("DataLoss", "Bad")],
        );
        let text = m.families.encode();
        assert!(text.contains(
            r#"csi_node_volume_health_status{namespace="ns",pod="p",volume="data",status="Degraded",reason="Slow"} 1"#
        ));
        m.set_volume("ns", "p", "data", &[c("DataLoss", "Bad")]);
        let text = m.families.encode();
        assert!(!text.contains("Slow"), "{text}");
        assert!(text.contains(r#"reason="Bad"} 1"#));
        m.forget_pod("ns", "p");
        assert!(!m.families.encode().contains("reason=\"Bad\""));
    }

    #[test]
    fn storage_series_are_removed_on_recovery() {
        let m = Metrics::default();
        m.set_storage("d", &[c("StorageUnreachable", "Net")]);
        assert!(m.families.encode().contains(
            r#"csi_node_storage_health_status{driver_name="d",status="StorageUnreachable",reason="Net"} 1"#
        ));
        m.set_storage("d", &[]);
        assert!(!m.families.encode().contains("reason=\"Net\""));
    }

    #[test]
    fn probe_counters_have_upstream_names() {
        let m = Metrics::default();
        m.writer.probe(
            "d",
            METHOD_VOLUME,
            false,
            std::time::Duration::from_millis(3),
        );
        let text = m.families.encode();
        assert!(text.contains(
            r#"csi_volume_health_probe_total{driver_name="d",method="NodeGetVolumeHealth",result="error"} 1"#
        ));
        assert!(text.contains("csi_volume_health_probe_duration_seconds_bucket{"));
    }
}
