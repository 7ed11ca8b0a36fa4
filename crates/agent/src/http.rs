//! The HTTP endpoint: /metrics, /healthz, /readyz.

use crate::error::{Error, Result};
use crate::metrics::Metrics;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
}

async fn metrics_page(State(s): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<AppState>) -> (StatusCode, &'static str) {
    if s.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

/// Binds `addr`; returns the bound address (useful with port 0) and the server to run.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
) -> Result<(
    SocketAddr,
    impl std::future::Future<Output = ()> + Send + 'static,
)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Http {
            addr: addr.to_string(),
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| Error::Http {
        addr: addr.to_string(),
        source,
    })?;
    let app = axum::Router::new()
        .route("/metrics", get(metrics_page))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AppState { metrics, ready });
    let server = async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the HTTP endpoint stopped: {e}");
        }
    };
    tracing::info!("serving metrics and health checks on http://{bound}");
    Ok((bound, server))
}
