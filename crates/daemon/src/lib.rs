//! Plumbing shared by volhealth's long-running components (the monitor, the node agent, and the
//! API server's `/metrics`):
//! the flag formats of the upstream sidecars and the `/metrics`, `/healthz`, `/readyz` endpoint.
//!
//! - [`duration`]: Go-style durations (`90s`, `1m30s`), parsed and formatted.
//! - [`feature_gates`]: `--feature-gates`, parsed once for every component.
//! - [`http_endpoint`]: `--http-endpoint` (`:PORT` or `HOST:PORT`).
//! - [`metrics_text`]: a prometheus-client registry in OpenMetrics or Prometheus text 0.0.4.
//! - [`exposition`]: the `/metrics` page: a component's families plus [`build_info`] and
//!   [`process_metrics`], in the format [`negotiation`] picks (Prometheus text 0.0.4 unless the
//!   client asks for OpenMetrics), each written by prometheus-client's encoder for it.
//! - [`endpoint_server`]: the HTTP server for metrics and health checks.
//! - [`shutdown_signal`]: SIGINT or SIGTERM, which stop a component.
//! - [`fd_limit`]: the open-files limit, raised to the hard limit at start.
//! - [`file_lock`]: an exclusive lock on a file, for one writer of a state directory at a time.
//! - [`in_progress`]: what a component is waiting for, named by a cut-off shutdown; marked by
//!   servers with [`in_progress_layer`] and for Kubernetes clients by [`kube_requests`].

pub mod build_info;
pub mod duration;
pub mod endpoint_server;
mod error;
pub mod exposition;
pub mod fd_limit;
pub mod feature_gates;
pub mod file_lock;
pub mod http_endpoint;
pub mod in_progress;
pub mod in_progress_layer;
pub mod kube_requests;
pub mod metrics_text;
pub mod negotiation;
pub mod process_metrics;
pub mod shutdown_signal;

pub use endpoint_server::{BoundEndpoint, Endpoints};
pub use error::{Error, Result};

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
