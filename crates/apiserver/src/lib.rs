//! volhealth's embedded Kubernetes API server: a v1.37 subset (core, storage, events,
//! coordination) persisted in SQLite, with the KEP-1432 health fields, their feature gate and
//! validation, node-scoped authorization, watch with resume, and `kubectl` tables.
//!
//! The code is in layers, each a folder, and each imports only the layers below it (a unit
//! test of the crate refuses any circle between files or between layers):
//!
//! | layer | what it holds |
//! |---|---|
//! | `server` | the entry: configuration, listeners, the request loop |
//! | `verbs` | what each verb does: the REST dispatcher, reads, writes, bindings, evictions, deletions, watches |
//! | `http` | one request over one connection: connection limits, bodies, the call context, responses, the shared server state |
//! | `security` | who may do what: authentication, Node and RBAC authorization, impersonation, TLS, kubeconfigs |
//! | `storage` | where objects live: the SQLite store and the bounded watch backlog |
//! | `wire` | how objects travel: protobuf, Table output, discovery, OpenAPI, the parsed request |
//! | `kinds` | what the objects are: names, quantities, selectors, validation, patches, paging, conversions, feature gates |
//! | `registry`, `errors`, `metrics` | the resources served, the API's errors, the server's metrics |

pub mod errors;
mod http;
mod kinds;
mod metrics;
pub mod registry;
mod security;
mod server;
mod storage;
mod verbs;
mod wire;

pub use errors::{ApiError, Error, Result};
pub use http::connections::{FIRST_REQUEST_TIMEOUT, default_max_connections};
pub use kinds::gate::FeatureGates;
pub use kinds::{patch, selectors, validation};
pub use security::tls::TlsConfig;
pub use security::{authz, kubeconfig, tls};
pub use server::{ServerConfig, serve};
pub use storage::backlog::{WATCH_QUEUE_BYTES, WATCH_QUEUE_EVENTS};
pub use wire::request;

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
