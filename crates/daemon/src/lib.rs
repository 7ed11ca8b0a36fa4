//! Plumbing shared by volhealth's long-running components (the monitor and the node agent):
//! the flag formats of the upstream sidecars and the `/metrics`, `/healthz`, `/readyz` endpoint.
//!
//! - [`duration`]: Go-style durations (`90s`, `1m30s`), parsed and formatted.
//! - [`feature_gates`]: `--feature-gates`, parsed once for every component.
//! - [`http_endpoint`]: `--http-endpoint` (`:PORT` or `HOST:PORT`).
//! - [`metrics_text`]: a prometheus-client registry in the text exposition format.
//! - [`endpoint_server`]: the HTTP server for metrics and health checks.
//! - [`shutdown_signal`]: SIGINT or SIGTERM, which stop a component.

pub mod duration;
pub mod endpoint_server;
mod error;
pub mod feature_gates;
pub mod http_endpoint;
pub mod metrics_text;
pub mod shutdown_signal;

pub use endpoint_server::{BoundEndpoint, Endpoints};
pub use error::{Error, Result};
