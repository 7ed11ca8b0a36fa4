//! volhealth's embedded Kubernetes API server: a v1.37 subset (core, storage, events,
//! coordination) persisted in SQLite, with the KEP-1432 health fields, their feature gate and
//! validation, node-scoped authorization, watch with resume, and `kubectl` tables.
//!
//! Modules import one another in one direction only (`tests/module_graph.rs` checks it): the
//! HTTP front (`server`) over the verbs (`rest`, `deletion`, `watch`) over the leaves they share
//! (`call`, `query`, `response`, `state`) over the object rules and the store.

pub mod authz;
mod backlog;
mod bare_refusal;
mod binding;
mod body;
mod call;
mod connections;
mod convert;
mod deletion;
mod discovery;
pub mod errors;
mod eviction;
mod field_validation;
mod gate;
pub mod kubeconfig;
mod metrics;
mod names;
mod objects;
mod openapi;
mod paging;
pub mod patch;
mod protobuf;
mod quantity;
mod query;
mod rbac_objects;
pub mod registry;
pub mod request;
mod response;
mod rest;
mod secrets;
pub mod selectors;
mod server;
mod slots;
mod state;
mod store;
mod table;
pub mod tls;
pub mod validation;
mod watch;

pub use backlog::{WATCH_QUEUE_BYTES, WATCH_QUEUE_EVENTS};
pub use connections::{FIRST_REQUEST_TIMEOUT, default_max_connections};
pub use errors::{ApiError, Error, Result};
pub use gate::FeatureGates;
pub use server::{ServerConfig, serve};
pub use tls::TlsConfig;

/// No two source files of this crate, and no two of its top-level modules, import each other.
#[cfg(test)]
#[test]
fn source_files_import_one_another_in_one_direction() {
    assert!(volhealth_module_graph::assert_acyclic(env!("CARGO_MANIFEST_DIR")) > 0);
}
