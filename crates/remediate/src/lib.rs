//! A remediation controller over the KEP-1432 status fields: rules from a policy file match a
//! condition on `pvc.status.healthStatus`, `pod.status.volumeHealth` or
//! `csinode.status.storageHealth`, held for a time measured from its `lastTransitionTime`, and
//! name actions to take.
//!
//! - [`policy`]: the policy file, validated with line-numbered errors, and [`policy::glob`].
//! - [`findings`]: the conditions of each object, and which rules are due for them.
//! - [`controller`]: the loop: CSINode watch, node actions and Events, dry-run by default.
//! - [`plan`]: the actions due now, once per transition, the taints to remove, the eviction budget.

pub mod controller;
pub mod findings;
pub mod plan;
pub mod policy;

pub use policy::{Action, ObjectKind, Policy, PolicyError, Rule};
