//! Request accounting at `/metrics`, named as the real API server names it.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use volhealth_daemon::metrics_text::Families;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: String,
    resource: String,
    subresource: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DurationLabels {
    verb: String,
    resource: String,
    subresource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

type HistogramFamily = Family<DurationLabels, Histogram, fn() -> Histogram>;

fn new_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
        10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
    ])
}

/// The server's metrics.
pub struct Metrics {
    /// Every family, for the `/metrics` page and the tests.
    pub families: Families,
    requests: Family<RequestLabels, Counter>,
    durations: HistogramFamily,
    terminated_watchers: Family<ResourceLabels, Counter>,
}

impl Default for Metrics {
    /// Registers `apiserver_request_total`, `apiserver_request_duration_seconds` and
    /// `apiserver_terminated_watchers_total`.
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, resource, subresource and HTTP response code.",
            requests.clone(),
        );
        let durations: HistogramFamily = Family::new_with_constructor(new_histogram);
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, resource and subresource.",
            durations.clone(),
        );
        let terminated_watchers = Family::<ResourceLabels, Counter>::default();
        registry.register(
            "apiserver_terminated_watchers",
            "Counter of watchers closed due to unresponsiveness broken by resource type.",
            terminated_watchers.clone(),
        );
        Metrics {
            families: registry.into(),
            requests,
            durations,
            terminated_watchers,
        }
    }
}

impl Metrics {
    /// Counts one watcher of `resource` (`plural` or `plural.group`) terminated for not reading.
    pub fn terminated_watcher(&self, resource: &str) {
        self.terminated_watchers
            .get_or_create(&ResourceLabels {
                resource: resource.to_string(),
            })
            .inc();
    }

    /// Counts one finished request.
    pub fn observe(&self, verb: &str, resource: &str, subresource: &str, code: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                verb: verb.to_string(),
                resource: resource.to_string(),
                subresource: subresource.to_string(),
                code: code.to_string(),
            })
            .inc();
        self.durations
            .get_or_create(&DurationLabels {
                verb: verb.to_string(),
                resource: resource.to_string(),
                subresource: subresource.to_string(),
            })
            .observe(seconds);
    }
}
