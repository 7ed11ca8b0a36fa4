//! A prometheus-client registry in OpenMetrics text (the endpoint serves it, or its
//! Prometheus text 0.0.4 rewrite, per the request; see [`crate::exposition`]).

use prometheus_client::registry::Registry;

/// The `Content-Type` of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Encodes every metric of `registry`; empty if encoding fails (it only can on a broken writer).
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    if prometheus_client::encoding::text::encode(&mut out, registry).is_err() {
        out.clear();
    }
    out
}
