//! What `/metrics`, `/healthz` and `/readyz` report (`volhealth_daemon` serves them).

use crate::engine::Shared;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use volhealth_daemon::Endpoints;
use volhealth_daemon::endpoint_server::flag_check;

/// Liveness and readiness as the endpoints report them.
#[derive(Debug)]
pub struct HealthFlags {
    /// Caches synced and the driver's capabilities probed.
    pub ready: Arc<AtomicBool>,
    /// False when leader election has failed.
    pub live: Arc<AtomicBool>,
}

impl Default for HealthFlags {
    fn default() -> Self {
        HealthFlags {
            ready: Arc::new(AtomicBool::new(false)),
            live: Arc::new(AtomicBool::new(true)),
        }
    }
}

/// What the endpoint answers: the monitor's metrics, liveness from the leader election, and
/// readiness from start-up and from whether the API server can be reached for writes.
pub fn endpoints(shared: Arc<Shared>, flags: Arc<HealthFlags>) -> Endpoints {
    let metrics = shared.clone();
    let ready = flags.ready.clone();
    let dropping = shared.clone();
    Endpoints::new(move |format| metrics.metrics.families.encode_as(format))
        .readyz_warning(move || {
            dropping.writer().drops_field().then(|| {
                "the API server accepts pvc.status.healthStatus writes but drops the field (its CSIVolumeHealth feature gate is off): no claim shows health".to_string()
            })
        })
        .healthz(flag_check(flags.live.clone(), "leader election failed"))
        .readyz(move || {
            if !ready.load(Ordering::Acquire) {
                return Err("waiting for the caches and the driver".into());
            }
            if shared.writer().api_unreachable() {
                return Err("the API server cannot be reached for status writes".into());
            }
            Ok(())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::http::StatusCode;
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
        let api = Arc::new(crate::tests::cycle_fakes::FakeApi::default());
        let shared = Arc::new(Shared::new(
            api.clone(),
            api,
            Arc::new(volhealth_writer::TokioClock::new()),
            std::time::Duration::from_secs(60),
        ));
        let flags = Arc::new(HealthFlags::default());
        let r = endpoints(shared.clone(), flags.clone()).into_router();
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
        assert_eq!(
            status_of(&r, "/healthz/leader-election").await.0,
            StatusCode::SERVICE_UNAVAILABLE,
            "the upstream probe path fails with the election"
        );
        shared
            .metrics
            .writer
            .write(crate::claim_target::RESOURCE, "success");
        let (code, body) = status_of(&r, "/metrics").await;
        assert_eq!(code, StatusCode::OK);
        assert!(
            body.contains(
                "csi_volume_health_status_writes_total{resource=\"persistentvolumeclaims/status\",result=\"success\"} 1"
            ),
            "{body}"
        );
    }
}
