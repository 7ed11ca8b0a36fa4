//! `volhealth monitor`: the controller-side writer of `pvc.status.healthStatus` (KEP-1432's
//! external health monitor).
//!
//! Every `--monitor-interval` it asks the CSI controller about volume health, with
//! ControllerListVolumeHealth (paged) when the driver advertises LIST_VOLUME_HEALTH, else with
//! ControllerGetVolumeHealth per bound volume, maps each volume to its bound claim through
//! watches of PVs and PVCs, and patches the claim's `/status` only when the desired value differs
//! from what is stored.
//!
//! # Layout
//! The machinery both writers share (timed probes, pacing, the write path with its overlay,
//! outcomes and backoff, the queue, Events, metric families) is `volhealth_writer`; this crate
//! keeps what is the monitor's own:
//! - [`controller`]: wiring, and [`run`] itself, with the Lease election of `volhealth_kube_access::leader`.
//! - [`engine`]: the mode, one report → queued desired state, the cycle loop; [`list_mode`] and
//!   [`get_mode`] are the two kinds of cycle.
//! - [`claim_target`]: PVC health as the shared writer's target; [`kube_patcher`] patches it.
//! - Boundaries, each with a real implementation and fakes in the unit tests:
//!   [`source::HealthSource`] ([`csi_source`]), [`claims::ClaimStore`] ([`kube_claims`]),
//!   [`claim_target::HealthPatcher`] ([`kube_patcher`]); [`watched`]: what the PV and PVC
//!   caches keep of each object, and the join of the two.
//! - [`coverage`]: which source watches the driver's volumes, published on its CSIDriver.
//! - [`http`] (what `/metrics`, `/healthz`, `/readyz` report), [`metrics`], [`config`].
//! - Tests: `cycle_fakes` (fake driver and API server, a rig on paused time) used by
//!   `list_mode_tests`, `get_mode_tests` and `write_tests`; unit tests sit next to their code.

mod claim_target;
mod claims;
pub mod config;
mod controller;
mod coverage;
mod csi_source;
mod engine;
mod error;
mod get_mode;
mod health_secret;
mod http;
mod kube_claims;
mod kube_patcher;
mod list_mode;
mod metrics;
mod source;
mod watched;

#[cfg(test)]
mod tests;

pub use config::{LeaderElection, MonitorConfig, SecretRef};
pub use controller::run;
pub use error::{Error, Result};

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
