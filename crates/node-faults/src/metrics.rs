//! The detector's Prometheus series: what each signal found, and the probe pool's load.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// `signal` label: the host mount table.
pub const SIGNAL_MOUNT_TABLE: &str = "mount_table";
/// `signal` label: the deadline-bounded `statfs` probes.
pub const SIGNAL_STATFS: &str = "statfs";
/// `signal` label: the kernel log.
pub const SIGNAL_KERNEL_LOG: &str = "kernel_log";
/// `signal` label: sysfs (iSCSI sessions, multipath paths).
pub const SIGNAL_SYSFS: &str = "sysfs";

/// `result` label: looked, nothing wrong.
pub const RESULT_OK: &str = "ok";
/// `result` label: looked, found a fault.
pub const RESULT_FAULT: &str = "fault";
/// `result` label: no answer within the deadline.
pub const RESULT_TIMEOUT: &str = "timeout";
/// `result` label: could not look.
pub const RESULT_ERROR: &str = "error";

/// Labels of `csi_volume_health_node_fault_probes_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    /// Which signal.
    pub signal: String,
    /// What it found.
    pub result: String,
}

/// The detector's series.
#[derive(Debug, Default)]
pub struct NodeFaultMetrics {
    probes: Family<ProbeLabels, Counter>,
    in_flight: Gauge,
    timed_out: Counter,
}

impl NodeFaultMetrics {
    /// Series not registered anywhere (tests, or a caller without a registry).
    pub fn unregistered() -> NodeFaultMetrics {
        NodeFaultMetrics::default()
    }

    /// Creates the series and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> NodeFaultMetrics {
        let m = NodeFaultMetrics::default();
        registry.register(
            "csi_volume_health_node_fault_probes",
            "Looks the node fault detector took, by signal and what it found",
            m.probes.clone(),
        );
        registry.register(
            "csi_volume_health_node_fault_probes_in_flight",
            "statfs probes running on the detector's threads now (a hung mount holds one)",
            m.in_flight.clone(),
        );
        registry.register(
            "csi_volume_health_node_fault_probe_timeouts",
            "statfs probes that gave no answer within the probe timeout",
            m.timed_out.clone(),
        );
        m
    }

    /// Counts one look of `signal` with `result`.
    pub fn count(&self, signal: &str, result: &str) {
        self.probes
            .get_or_create(&ProbeLabels {
                signal: signal.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// The count of `signal` with `result` (tests).
    pub fn get(&self, signal: &str, result: &str) -> u64 {
        self.probes
            .get_or_create(&ProbeLabels {
                signal: signal.to_string(),
                result: result.to_string(),
            })
            .get()
    }

    pub(crate) fn set_in_flight(&self, n: usize) {
        self.in_flight.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub(crate) fn timed_out(&self) {
        self.timed_out.inc();
    }
}
