//! `/metrics`, `/healthz` and `/readyz` (axum).

use crate::engine::Shared;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Liveness and readiness as the endpoints report them.
#[derive(Debug)]
pub struct HealthFlags {
    /// Caches synced and the driver's capabilities probed.
    pub ready: AtomicBool,
    /// False when leader election has failed.
    pub live: Arc<AtomicBool>,
}

impl Default for HealthFlags {
    fn default() -> Self {
        HealthFlags {
            ready: AtomicBool::new(false),
            live: Arc::new(AtomicBool::new(true)),
        }
    }
}

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    flags: Arc<HealthFlags>,
}

async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.shared.metrics.encode(),
    )
}

async fn healthz(State(s): State<AppState>) -> impl IntoResponse {
    if s.flags.live.load(Ordering::Acquire) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "leader election failed")
    }
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    if s.flags.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "waiting for the caches and the driver",
        )
    }
}

/// The endpoints' router.
pub fn router(shared: Arc<Shared>, flags: Arc<HealthFlags>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AppState { shared, flags })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    async fn status_of(r: &Router, path: &str) -> (StatusCode, String) {
        let resp = r
            .clone()
            .oneshot(
                axum::http::Request::get(path)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let code = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (code, String::from_utf8_lossy(&body).to_string())
    }

    #[tokio::test]
    async fn endpoints_follow_the_flags() {
        let shared = Arc::new(Shared::default());
        let flags = Arc::new(HealthFlags::default());
        let r = router(shared.clone(), flags.clone());
        assert_eq!(
            status_of(&r, "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(status_of(&r, "/healthz").await.0, StatusCode::OK);
        flags.ready.store(true, Ordering::Release);
        assert_eq!(status_of(&r, "/readyz").await.0, StatusCode::OK);
        flags.live.store(false, Ordering::Release);
        assert_eq!(
            status_of(&r, "/healthz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        shared.metrics.write("success");
        let (code, body) = status_of(&r, "/metrics").await;
        assert_eq!(code, StatusCode::OK);
        assert!(
            body.contains("csi_volume_health_status_writes_total{result=\"success\"} 1"),
            "{body}"
        );
    }
}
