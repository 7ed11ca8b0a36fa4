//! A kube-scheduler extender implementing KEP-1432's CSIStorageHealth filter: pods whose claims
//! are bound to a driver with a HealthSchedulingPolicy stay off nodes whose
//! `csinode.status.storageHealth` matches one of its rules.
//!
//! - [`policy`]: the policy, read from the CSIDriver annotation and validated.
//! - [`matching`]: the KEP's matching logic over a [`matching::ClusterView`].
//! - [`cache`]: the view over informer caches; [`memory`]: one over plain maps.
//! - [`wire`]: `ExtenderArgs` / `ExtenderFilterResult` in kube-scheduler's encoding.
//! - [`server`]: `POST /filter`, metrics and health pages, and [`run`].
//! - [`metrics`]: the metric families.

pub mod cache;
pub mod matching;
pub mod memory;
pub mod metrics;
pub mod policy;
pub mod server;
pub mod wire;

pub use matching::{ClusterView, Rejection, Verdict, filter};
pub use policy::{ANNOTATION, HealthSchedulingPolicy};
pub use server::{Error, ExtenderConfig, router, run};

#[cfg(test)]
mod tests;

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
