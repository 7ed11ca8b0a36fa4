//! The metric families both writers export, with the same names, labels, buckets and help texts,
//! and [`StatusSeries`], which keeps a writer's per-object condition gauges equal to what is stored.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// Labels of `csi_volume_health_probe_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    /// The driver's name.
    pub driver_name: String,
    /// The RPC.
    pub method: String,
    /// `success` or `error` (timeouts and invalid answers included).
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

/// Labels of `csi_volume_health_status_writes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `persistentvolumeclaims/status`, `pods/status`, `csinodes/status` or `csinodes`.
    pub resource: String,
    /// `success`, `rejected` (refused with a 4xx), `dropped` (accepted, field not stored) or `error`.
    pub result: String,
}

/// Labels of `csi_volume_health_status_writes_dropped_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// The resource written.
    pub resource: String,
}

/// Labels of `csi_volume_health_unknown_condition_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnknownLabels {
    /// The raw numeric status the driver sent.
    pub status: String,
}

/// Labels of `volhealth_events_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// The Event's reason.
    pub reason: String,
    /// `sent`, `coalesced` (folded into a pending Event), `aggregated` (summarised with similar
    /// Events), `dropped` (the queue was full) or `error`.
    pub result: String,
}

/// Labels of `csi_volume_health_cycle_duration_seconds` and
/// `csi_volume_health_cycle_overruns_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CycleLabels {
    /// The driver whose volumes the cycle probed.
    pub driver_name: String,
    /// `list` (ControllerListVolumeHealth pages, and the Gets confirming recoveries) or `get`
    /// (one ControllerGetVolumeHealth per bound volume), both the monitor's; `node` (the agent's
    /// NodeGetVolumeHealth and NodeGetStorageHealth calls for one driver).
    pub mode: String,
}

/// The buckets of `csi_volume_health_cycle_duration_seconds`: from a quick list cycle to a sweep
/// spread over a long interval.
pub const CYCLE_BUCKETS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

fn cycle_histogram() -> Histogram {
    Histogram::new(CYCLE_BUCKETS)
}

/// The buckets of `csi_volume_health_probe_duration_seconds` (up to the longest sensible deadline).
pub const PROBE_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0,
];

fn probe_histogram() -> Histogram {
    Histogram::new(PROBE_BUCKETS)
}

type HistogramFamily = Family<MethodLabels, Histogram, fn() -> Histogram>;

/// The shared families, registered once on a writer's registry.
#[derive(Debug)]
pub struct WriterMetrics {
    probe_total: Family<ProbeLabels, Counter>,
    probe_duration: HistogramFamily,
    writes_total: Family<WriteLabels, Counter>,
    writes_dropped: Family<ResourceLabels, Counter>,
    field_dropped: Family<ResourceLabels, Gauge>,
    unknown_total: Family<UnknownLabels, Counter>,
    events_total: Family<EventLabels, Counter>,
    cycle_duration: Family<CycleLabels, Histogram, fn() -> Histogram>,
    cycle_overruns: Family<CycleLabels, Counter>,
}

impl WriterMetrics {
    /// Registers every shared family on `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = WriterMetrics {
            probe_total: Family::default(),
            probe_duration: Family::new_with_constructor(probe_histogram),
            writes_total: Family::default(),
            writes_dropped: Family::default(),
            field_dropped: Family::default(),
            unknown_total: Family::default(),
            events_total: Family::default(),
            cycle_duration: Family::new_with_constructor(cycle_histogram),
            cycle_overruns: Family::default(),
        };
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "csi_volume_health_probe",
            "CSI volume health RPCs by driver, method and result",
            m.probe_total.clone(),
        );
        registry.register(
            "csi_volume_health_probe_duration_seconds",
            "Duration of CSI volume health RPCs (each list page separately)",
            m.probe_duration.clone(),
        );
        registry.register(
            "csi_volume_health_status_writes",
            "Health status writes by resource and result",
            m.writes_total.clone(),
        );
        registry.register(
            "csi_volume_health_status_writes_dropped",
            "Health status writes the API server accepted without storing the field or refused (feature gate off?)",
            m.writes_dropped.clone(),
        );
        registry.register(
            "csi_volume_health_status_field_dropped",
            "1 while the API server drops the health field of this resource on write (its CSIVolumeHealth feature gate is off), else 0",
            m.field_dropped.clone(),
        );
        registry.register(
            "csi_volume_health_unknown_condition",
            "Health entries with a status number this version does not know (never treated as healthy)",
            m.unknown_total.clone(),
        );
        registry.register(
            "volhealth_events",
            "Kubernetes Events about health transitions, by reason and result",
            m.events_total.clone(),
        );
        registry.register(
            "csi_volume_health_cycle_duration_seconds",
            "Duration of probe cycles, from their start until every answer is in and applied",
            m.cycle_duration.clone(),
        );
        registry.register(
            "csi_volume_health_cycle_overruns",
            "Probe cycles that ended after the next was due (the next then starts at once)",
            m.cycle_overruns.clone(),
        );
        m
    }

    /// Records one finished probe cycle of `driver_name`'s volumes in `mode` that took `took`,
    /// and whether it overran its interval (ended after the next cycle was due).
    pub fn cycle(&self, driver_name: &str, mode: &str, took: Duration, overran: bool) {
        let labels = CycleLabels {
            driver_name: driver_name.into(),
            mode: mode.into(),
        };
        self.cycle_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if overran {
            self.cycle_overruns.get_or_create(&labels).inc();
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

    /// How many RPCs were counted with these labels (for tests and the bench).
    pub fn probe_count(&self, driver_name: &str, method: &str, result: &str) -> u64 {
        self.probe_total
            .get_or_create(&ProbeLabels {
                driver_name: driver_name.into(),
                method: method.into(),
                result: result.into(),
            })
            .get()
    }

    /// Records whether the last answered write of `resource` had its health field dropped.
    pub fn set_field_dropped(&self, resource: &str, dropped: bool) {
        self.field_dropped
            .get_or_create(&ResourceLabels {
                resource: resource.into(),
            })
            .set(i64::from(dropped));
    }

    /// Counts one status write of `resource` by result.
    pub fn write(&self, resource: &str, result: &str) {
        self.writes_total
            .get_or_create(&WriteLabels {
                resource: resource.into(),
                result: result.into(),
            })
            .inc();
        if result == "dropped" || result == "rejected" {
            self.writes_dropped
                .get_or_create(&ResourceLabels {
                    resource: resource.into(),
                })
                .inc();
        }
    }

    /// How many writes were counted with these labels.
    pub fn write_count(&self, resource: &str, result: &str) -> u64 {
        self.writes_total
            .get_or_create(&WriteLabels {
                resource: resource.into(),
                result: result.into(),
            })
            .get()
    }

    /// Counts one newly seen entry with an unknown status value.
    pub fn unknown_condition(&self, raw_status: i32) {
        self.unknown_total
            .get_or_create(&UnknownLabels {
                status: raw_status.to_string(),
            })
            .inc();
    }

    /// Counts one Event outcome.
    pub fn event(&self, reason: &str, result: &str) {
        self.events_total
            .get_or_create(&EventLabels {
                reason: reason.into(),
                result: result.into(),
            })
            .inc();
    }
}

/// A gauge family of `1` per stored condition, kept equal to what is stored: setting an
/// object's conditions removes the series of conditions it no longer has.
pub struct StatusSeries<K, L> {
    family: Family<L, Gauge>,
    exported: Mutex<HashMap<K, BTreeSet<L>>>,
}

impl<K, L> std::fmt::Debug for StatusSeries<K, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatusSeries")
    }
}

impl<K, L> StatusSeries<K, L>
where
    K: Clone + Eq + Hash,
    L: Clone + Eq + Hash + Ord + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    /// Registers the family `name` on `registry`.
    pub fn register(registry: &mut Registry, name: &str, help: &str) -> Self {
        let family = Family::<L, Gauge>::default();
        registry.register(name, help, family.clone());
        StatusSeries {
            family,
            exported: Mutex::new(HashMap::new()),
        }
    }

    /// Makes `key`'s series exactly `labels`; an empty set removes them all.
    pub fn set(&self, key: &K, labels: BTreeSet<L>) {
        let mut exported = self.exported.lock().unwrap_or_else(|p| p.into_inner());
        let old = exported.remove(key).unwrap_or_default();
        for gone in old.difference(&labels) {
            self.family.remove(gone);
        }
        for l in &labels {
            self.family.get_or_create(l).set(1);
        }
        if !labels.is_empty() {
            exported.insert(key.clone(), labels);
        }
    }

    /// The objects that have series now.
    pub fn keys(&self) -> Vec<K> {
        self.exported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Removes the series of every object `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&K) -> bool) {
        for key in self.keys() {
            if !keep(&key) {
                self.set(&key, BTreeSet::new());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
    struct L {
        object: String,
        reason: String,
    }

    #[test]
    fn shared_names_and_series_follow_the_stored_value() {
        let mut registry = Registry::default();
        let m = WriterMetrics::new(&mut registry);
        let s: StatusSeries<String, L> = StatusSeries::register(&mut registry, "x_status", "test");
        m.probe("d", "NodeGetVolumeHealth", true, Duration::from_millis(3));
        m.write("pods/status", "dropped");
        m.unknown_condition(7);
        m.cycle("d", "node", Duration::from_millis(700), false);
        m.cycle("d", "node", Duration::from_millis(1200), true);
        let l = |r: &str| L {
            object: "o".into(),
            reason: r.into(),
        };
        s.set(&"o".to_string(), BTreeSet::from([l("A"), l("B")]));
        s.set(&"o".to_string(), BTreeSet::from([l("B")]));
        let text = volhealth_daemon::metrics_text::encode(&registry);
        for want in [
            r#"csi_volume_health_probe_total{driver_name="d",method="NodeGetVolumeHealth",result="success"} 1"#,
            r#"csi_volume_health_probe_duration_seconds_bucket{le="0.005",driver_name="d",method="NodeGetVolumeHealth"} 1"#,
            r#"csi_volume_health_status_writes_total{resource="pods/status",result="dropped"} 1"#,
            r#"csi_volume_health_status_writes_dropped_total{resource="pods/status"} 1"#,
            r#"csi_volume_health_unknown_condition_total{status="7"} 1"#,
            r#"x_status{object="o",reason="B"} 1"#,
            r#"csi_volume_health_cycle_duration_seconds_count{driver_name="d",mode="node"} 2"#,
            r#"csi_volume_health_cycle_duration_seconds_bucket{le="0.75",driver_name="d",mode="node"} 1"#,
            r#"csi_volume_health_cycle_overruns_total{driver_name="d",mode="node"} 1"#,
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        assert!(!text.contains(r#"reason="A""#), "{text}");
        s.retain(|_| false);
        assert!(!volhealth_daemon::metrics_text::encode(&registry).contains("x_status{"));
    }
}
