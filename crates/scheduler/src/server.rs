//! The extender's HTTP side: `POST /filter` beside `/metrics`, `/healthz` and `/readyz`, and
//! [`run`], which starts the caches and serves until shutdown.

use crate::cache::KubeView;
use crate::matching::{ClusterView, filter};
use crate::metrics::{RejectedLabels, SchedulerMetrics};
use crate::wire::{ExtenderArgs, ExtenderFilterResult, node_name};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use prometheus_client::registry::Registry;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use volhealth_daemon::Endpoints;

/// How the extender runs.
#[derive(Debug, Clone, Default)]
pub struct ExtenderConfig {
    /// Kubeconfig file (None: the standard inference).
    pub kubeconfig: Option<PathBuf>,
}

/// Why the extender stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes client could not be built.
    #[error("loading the Kubernetes client: {0}")]
    Client(#[from] volhealth_kube_access::Error),
    /// Serving HTTP failed.
    #[error("serving HTTP on {addr}: {source}")]
    Serve {
        /// The listen address.
        addr: String,
        /// The failure.
        source: std::io::Error,
    },
}

struct AppState<V> {
    view: Arc<V>,
    metrics: Arc<SchedulerMetrics>,
}

/// The routes: `POST /filter` over `view`, and the metrics and health pages.
pub fn router<V: ClusterView + Send + Sync + 'static>(
    view: Arc<V>,
    metrics: Arc<SchedulerMetrics>,
    registry: Arc<Registry>,
) -> Router {
    let ready = view.clone();
    let endpoints = Endpoints::from_registry(registry).readyz(move || {
        if ready.is_synced() {
            Ok(())
        } else {
            Err("informer caches not synced yet".into())
        }
    });
    Router::new()
        .route("/filter", post(filter_handler::<V>))
        .with_state(Arc::new(AppState { view, metrics }))
        .merge(endpoints.into_router())
}

async fn filter_handler<V: ClusterView + Send + Sync + 'static>(
    State(state): State<Arc<AppState<V>>>,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let (result, code, label) = answer(&*state.view, &state.metrics, &body);
    state.metrics.request(label);
    state
        .metrics
        .latency
        .observe(started.elapsed().as_secs_f64());
    (code, axum::Json(result.to_json())).into_response()
}

/// Answers one request body: the result, the HTTP status, and the metric's result label.
pub fn answer(
    view: &impl ClusterView,
    metrics: &SchedulerMetrics,
    body: &[u8],
) -> (ExtenderFilterResult, StatusCode, &'static str) {
    let args = match ExtenderArgs::decode(body) {
        Ok(a) => a,
        Err(e) => {
            return (
                ExtenderFilterResult::error(e.to_string()),
                StatusCode::BAD_REQUEST,
                "bad_request",
            );
        }
    };
    if !view.is_synced() {
        return (
            ExtenderFilterResult::error(
                "CSIStorageHealth: the extender's caches are not synced yet",
            ),
            StatusCode::OK,
            "error",
        );
    }
    let names = args.candidate_names();
    let verdict = filter(&args.pod, names.iter().map(String::as_str), view);
    let mut result = ExtenderFilterResult::default();
    for (node, why) in &verdict.failed {
        metrics
            .rejected
            .get_or_create(&RejectedLabels {
                driver_name: why.driver.clone(),
                status: why.status.clone(),
            })
            .inc();
        // Preempting pods cannot make a storage backend healthy, so preemption should not try.
        result
            .failed_and_unresolvable_nodes
            .insert(node.clone(), why.to_string());
    }
    if let Some(nodes) = args.nodes {
        let passed: HashSet<&str> = verdict.passed.iter().map(String::as_str).collect();
        result.nodes = Some(
            nodes
                .into_iter()
                .filter(|n| passed.contains(node_name(n)))
                .collect(),
        );
    } else {
        result.node_names = Some(verdict.passed);
    }
    (result, StatusCode::OK, "success")
}

/// Watches the cluster through `config`'s client and serves on `listener` until `shutdown`.
pub async fn run(
    config: ExtenderConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let client = volhealth_kube_access::client::load(config.kubeconfig.as_deref())
        .await?
        .client;
    let mut registry = Registry::default();
    let metrics = Arc::new(SchedulerMetrics::new(&mut registry));
    let view = Arc::new(KubeView::start(client, metrics.clone()));
    let app = router(view, metrics, Arc::new(registry));
    tracing::info!("scheduler extender listening on http://{addr} (POST /filter)");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| Error::Serve { addr, source })
}
