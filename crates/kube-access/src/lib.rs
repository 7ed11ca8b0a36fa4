//! volhealth's Kubernetes plumbing, one place for every component that talks to the API server
//! (the monitor, the agent, the remediation controller, the scheduler extender and the CLI).
//!
//! # Layout
//! - [`client`]: loading the client with one precedence (`--kubeconfig`, `KUBECONFIG`, the
//!   in-cluster service account as kube loads it, `~/.kube/config`); [`client::in_cluster`].
//! - [`leader`]: leader election on a Lease that stops leading when the Lease is not fresh, with
//!   [`leader::Leadership`] to ask that at the moment of acting.
//! - [`watch`] (a reflector and the watch loop), [`compact_watch`] (a watch cache of small
//!   records, not objects), [`partial`] (watched objects decoded into the fields a component
//!   reads), [`watched`] (the PV and PVC records both writers read).
//! - [`events`]: Events on a budget of their own: the recorder's queue (coalescing repeats,
//!   summarising many similar ones) and the sink it sends through; [`api_failure`] (a failed
//!   request, classified by how it is handled) and [`rate_limit`] (a token bucket, for the
//!   client-side QPS and the Events' budget) beside it.
//! - [`objects`]: the optional lists inside objects (a pod's volumes and claims, a node's
//!   taints, a CSINode's storage health) read as slices.
//! - [`backoff`]: the one retry backoff, with jitter (the `volhealth-backoff` crate, which the
//!   CSI client uses without this crate's Kubernetes dependencies).

pub use volhealth_backoff as backoff;

pub mod api_failure;
pub mod client;
pub mod compact_watch;
mod error;
pub mod events;
pub mod leader;
pub mod objects;
pub mod partial;
pub mod rate_limit;
pub mod watch;
pub mod watched;

pub use api_failure::{ApiFailure, FailureKind};
pub use backoff::{Backoff, Holds};
pub use error::{Error, Result};
pub use rate_limit::RateLimiter;

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
