//! The state every request handler shares.

use crate::kinds::gate::FeatureGates;
use crate::metrics::Metrics;
use crate::security::authz::{Authorizer, Tokens};
use crate::storage::store::Store;
use std::sync::Arc;
use std::time::Duration;

/// Shared state of the request handlers.
pub struct AppState {
    /// The object store.
    pub store: Arc<Store>,
    /// Feature gates.
    pub gates: FeatureGates,
    /// Static tokens, if authentication is on.
    pub tokens: Option<Tokens>,
    /// The authorizer chain (`--authorization-mode`).
    pub authorizer: Authorizer,
    /// Request metrics.
    pub metrics: Metrics,
    /// Bookmark interval for watches.
    pub bookmark_interval: Duration,
    /// `host:port` clients reach us at.
    pub address: String,
    /// How much each watcher may leave unread, and for how long.
    pub watch_backlog: crate::storage::backlog::Limits,
    /// Flips to true on shutdown so that open watches end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}
