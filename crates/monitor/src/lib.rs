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
//! - [`controller`]: wiring, and [`run`] itself.
//! - [`engine`]: the mode, one report → desired status, unknown values, the cycle loop;
//!   [`list_mode`] and [`get_mode`] are the two kinds of cycle.
//! - [`write_queue`] (keyed coalescing queue), [`write_loop`] (the single writer),
//!   [`write_state`] (own recent writes, dropped-write holds), [`rate_limit`], [`events`].
//! - Boundaries, each with a real implementation and fakes in the unit tests:
//!   [`source::HealthSource`] ([`csi_source`]), [`claims::ClaimStore`] ([`kube_claims`]),
//!   [`status_writer::StatusWriter`] ([`kube_writer`]), [`clock::Clock`].
//! - [`leader`] (Lease election), [`http`] (what `/metrics`, `/healthz`, `/readyz` report; served
//!   by `volhealth_daemon`), [`metrics`], [`config`] ([`MonitorConfig`]).
//! - Tests: `cycle_fakes` (fake driver and API server, a rig on paused time) used by
//!   `list_mode_tests`, `get_mode_tests` and `write_tests`; unit tests sit next to their code.

pub mod claims;
pub mod clock;
pub mod config;
pub mod controller;
pub mod csi_source;
pub mod engine;
mod error;
pub mod events;
pub mod get_mode;
pub mod http;
pub mod kube_claims;
pub mod kube_writer;
pub mod leader;
pub mod list_mode;
pub mod metrics;
pub mod rate_limit;
pub mod source;
pub mod status_writer;
pub mod write_loop;
pub mod write_queue;
pub mod write_state;

#[cfg(test)]
mod cycle_fakes;
#[cfg(test)]
mod get_mode_tests;
#[cfg(test)]
mod list_mode_tests;
#[cfg(test)]
mod write_tests;

pub use config::{LeaderElection, MonitorConfig, SecretRef};
pub use controller::run;
pub use error::{Error, Result};
