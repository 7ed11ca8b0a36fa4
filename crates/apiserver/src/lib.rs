//! volhealth's embedded Kubernetes API server: a v1.37 subset (core, storage, events,
//! coordination) persisted in SQLite, with the KEP-1432 health fields, their feature gate and
//! validation, node-scoped authorization, watch with resume, and `kubectl` tables.

pub mod authz;
pub mod convert;
pub mod deletion;
pub mod discovery;
pub mod errors;
pub mod gate;
pub mod kubeconfig;
pub mod metrics;
pub mod objects;
pub mod patch;
pub mod registry;
pub mod request;
pub mod rest;
pub mod secrets;
pub mod selectors;
pub mod server;
pub mod store;
pub mod table;
pub mod validation;
pub mod watch;

pub use errors::{ApiError, Error, Result};
pub use gate::FeatureGates;
pub use server::{ServerConfig, serve};
