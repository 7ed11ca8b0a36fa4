//! The machinery both volume health writers share: the controller-side monitor (writing
//! `pvc.status.healthStatus`) and the node agent (writing `pod.status.volumeHealth` and
//! `csinode.status.storageHealth`). Each writer keeps only what is its own (how it lists its
//! objects, which RPCs it calls, how it reads and patches its object); everything else is here,
//! so the same situation gets the same behaviour, metric and Event from both.
//!
//! # The offer path
//! A writer's probe cycle hands [`Offers::offer`] an object's key and the driver's report, and
//! nothing else. Report → what is stored now (the overlay, read once) → the one decision (the
//! KEP's rules for the object's [`HealthField`], which also gives the write's place in line) →
//! hold → queue → the write loop → PATCH → outcome: each step is taken in [`offer`] once, for
//! both writers and all three object kinds. Its tests count one decision and one overlay read
//! per object for one report.
//!
//! # Layout
//! - [`offer`]: the offer path and the write loop; [`field`]: the three health fields and what a
//!   report makes of each; [`queue`]: the coalescing severity-ordered queue.
//! - [`status`]: the PATCH of one object kind ([`status::Target`]): outcome, backoff, overlay,
//!   metrics, Events.
//! - [`probe`]: a health RPC under its deadline, counted and timed; what is a valid answer; the
//!   failure log (once into failure, once on recovery).
//! - [`pacing`]: calls spread over the interval, one cycle per interval.
//! - [`overlay`] (own recent writes), [`api`] (outcome classification), [`backoff`] (the two
//!   write holds, over the one jittered backoff), [`rate_limit`].
//! - [`metrics`]: the shared metric families and per-object condition series.
//! - [`events`]: which change deserves an Event, and the recorder with its own budget.
//! - [`reports`]: unknown values and sanitising fixes, reported once.
//! - [`intervals`]: per-driver probe intervals from CSIDriver annotations.
//! - [`coverage`]: which source watches a driver's volumes, as the writers publish it.
//! - [`clock`].
//!
//! The Kubernetes plumbing under it (client loading, leader election, watch caches, the watched
//! PV and PVC records, the backoff with jitter) is `volhealth-kube-access`.

mod api;
pub mod backoff;
mod clock;
pub mod coverage;
pub mod events;
pub mod field;
pub mod intervals;
mod metrics;
pub mod offer;
mod overlay;
pub mod pacing;
pub mod probe;
mod queue;
mod rate_limit;
mod reports;
mod status;

pub use api::{ApiFailure, FailureKind};
pub use clock::{Clock, SystemClock, TokioClock};
pub use events::{EventRecorder, EventSink, EventType, HealthEvent, KubeEventSink, ObjectRef};
pub use field::{Change, EntryReports, HealthField};
pub use metrics::{StatusSeries, WriterMetrics};
pub use offer::{MAX_WRITES_IN_FLIGHT, Offers, Queued, QueuedTarget, ReportOf, WriteLoop};
pub use probe::{FailureLog, ProbeError, timed, volume_answer};
pub use queue::WriteQueue;
pub use rate_limit::RateLimiter;
pub use reports::ReportNotes;
pub use status::{Outcome, Patched, StatusWriter, Stored, Target};

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
