//! The extender's metric families.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of `volhealth_scheduler_filter_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `success`, `bad_request` (undecodable) or `error` (caches not synced).
    pub result: String,
}

/// Labels of `volhealth_scheduler_nodes_rejected_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectedLabels {
    /// The driver whose storage is unhealthy.
    pub driver_name: String,
    /// The condition's status.
    pub status: String,
}

/// Labels of `volhealth_scheduler_policy_invalid`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriverLabels {
    /// The CSIDriver's name.
    pub driver_name: String,
}

/// Every family the extender exports.
#[derive(Debug)]
pub struct SchedulerMetrics {
    /// Filter requests by result.
    pub requests: Family<ResultLabels, Counter>,
    /// Time to answer a filter request.
    pub latency: Histogram,
    /// Nodes filtered out, by driver and status.
    pub rejected: Family<RejectedLabels, Counter>,
    /// 1 while a CSIDriver's policy annotation is invalid (and ignored).
    pub policy_invalid: Family<DriverLabels, Gauge>,
}

impl SchedulerMetrics {
    /// The families, registered in `registry`.
    pub fn new(registry: &mut Registry) -> SchedulerMetrics {
        let m = SchedulerMetrics {
            requests: Family::default(),
            // 50 µs .. ~0.4 s.
            latency: Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                0.000_05, 2.0, 14,
            )),
            rejected: Family::default(),
            policy_invalid: Family::default(),
        };
        registry.register(
            "volhealth_scheduler_filter_requests",
            "Extender filter requests, by result",
            m.requests.clone(),
        );
        registry.register(
            "volhealth_scheduler_filter_duration_seconds",
            "Time to answer an extender filter request",
            m.latency.clone(),
        );
        registry.register(
            "volhealth_scheduler_nodes_rejected",
            "Nodes filtered out because of their storage health, by driver and status",
            m.rejected.clone(),
        );
        registry.register(
            "volhealth_scheduler_policy_invalid",
            "1 while a CSIDriver's health scheduling policy annotation is invalid and ignored",
            m.policy_invalid.clone(),
        );
        m
    }

    /// Counts one request by result.
    pub fn request(&self, result: &str) {
        self.requests
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
    }
}
