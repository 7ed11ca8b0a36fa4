//! A remediation controller over the KEP-1432 status fields: rules from a policy file match a
//! condition on `pvc.status.healthStatus`, `pod.status.volumeHealth` or
//! `csinode.status.storageHealth`, held for a time measured from its `lastTransitionTime`, and
//! name actions to take.
//!
//! - [`policy`]: the policy file, validated with line-numbered errors, and the [`policy::glob`] patterns it matches with.
//! - [`findings`]: the conditions of each object, and which rules are due for them.
//! - [`plan`]: the actions due now, once per transition, the taints to remove, the eviction budget.
//! - [`cache`]: the watch-fed caches the findings come from.
//! - [`act`]: carrying actions out against the API server.
//! - [`limits`]: per-action rate limits.
//! - [`webhook`]: the webhook action's deliveries, retried with backoff.
//! - [`leader`]: leader election on a Lease.
//! - [`controller`]: the loop, dry-run by default.

pub mod act;
pub mod cache;
pub mod controller;
pub mod findings;
pub mod leader;
pub mod limits;
pub mod plan;
pub mod policy;
pub mod webhook;

pub use policy::{Action, ObjectKind, Policy, PolicyError, Rule};

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
