//! The HTTP endpoint of a long-running component: `/metrics`, `/healthz` and `/readyz`.

use crate::error::{Error, Result};
use crate::negotiation::Format;
use crate::{exposition, metrics_text};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Where the metrics page is served unless `--metrics-path` says otherwise.
pub const DEFAULT_METRICS_PATH: &str = "/metrics";

/// The liveness path the upstream sidecars' deployments probe.
pub const LEADER_ELECTION_HEALTHZ: &str = "/healthz/leader-election";

/// The metrics path of this process, set once from the command line.
static METRICS_PATH: OnceLock<String> = OnceLock::new();

/// A `--metrics-path` that cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MetricsPathError {
    /// Not starting with `/`.
    #[error("must start with /")]
    NotAbsolute,
    /// One of the health paths.
    #[error("is taken by the health checks")]
    Taken,
    /// A route pattern rather than a path.
    #[error("must be a plain path")]
    NotPlain,
}

/// Sets the path of the metrics page for every endpoint of this process (the upstream sidecars'
/// `--metrics-path`); it must start with `/` and not be `/healthz` or `/readyz`. The first call wins.
pub fn set_metrics_path(path: &str) -> std::result::Result<(), MetricsPathError> {
    if !path.starts_with('/') {
        return Err(MetricsPathError::NotAbsolute);
    }
    if path == "/healthz" || path == "/readyz" || path == LEADER_ELECTION_HEALTHZ {
        return Err(MetricsPathError::Taken);
    }
    if path.contains(['{', '}', '*']) {
        return Err(MetricsPathError::NotPlain);
    }
    let _ = METRICS_PATH.set(path.to_string());
    Ok(())
}

/// The path the metrics page is served on.
pub fn metrics_path() -> &'static str {
    METRICS_PATH
        .get()
        .map(String::as_str)
        .unwrap_or(DEFAULT_METRICS_PATH)
}

/// Why a health check fails: the text `/healthz` or `/readyz` answers with its 503.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotReady(pub String);

impl From<&str> for NotReady {
    fn from(reason: &str) -> Self {
        NotReady(reason.to_string())
    }
}

impl From<String> for NotReady {
    fn from(reason: String) -> Self {
        NotReady(reason)
    }
}

/// A health check: `Ok` answers 200 `ok`, `Err(reason)` answers 503 with the reason.
pub type Check = Arc<dyn Fn() -> std::result::Result<(), NotReady> + Send + Sync>;

type Encode = Arc<dyn Fn(Format) -> String + Send + Sync>;

/// What the three paths answer.
#[derive(Clone)]
pub struct Endpoints {
    metrics: Encode,
    healthz: Check,
    readyz: Check,
    readyz_warning: Warning,
}

/// A condition worth telling an operator that does not make the component unready.
pub type Warning = Arc<dyn Fn() -> Option<String> + Send + Sync>;

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Endpoints")
    }
}

impl Endpoints {
    /// `/metrics` answers with `encode(format)` (the component's families in the format the
    /// client asked for, as [`metrics_text::encode_as`] writes them), build info and process
    /// metrics; `/healthz` and `/readyz` pass until replaced.
    pub fn new(encode: impl Fn(Format) -> String + Send + Sync + 'static) -> Endpoints {
        let pass: Check = Arc::new(|| Ok(()));
        Endpoints {
            metrics: Arc::new(encode),
            healthz: pass.clone(),
            readyz: pass,
            readyz_warning: Arc::new(|| None),
        }
    }

    /// `/metrics` answers with every metric of `registry`.
    pub fn from_registry(registry: Arc<Registry>) -> Endpoints {
        Endpoints::new(move |format| metrics_text::encode_as(&registry, format))
    }

    /// Sets the liveness check behind `/healthz`.
    pub fn healthz(
        mut self,
        check: impl Fn() -> std::result::Result<(), NotReady> + Send + Sync + 'static,
    ) -> Endpoints {
        self.healthz = Arc::new(check);
        self
    }

    /// Sets the readiness check behind `/readyz`.
    pub fn readyz(
        mut self,
        check: impl Fn() -> std::result::Result<(), NotReady> + Send + Sync + 'static,
    ) -> Endpoints {
        self.readyz = Arc::new(check);
        self
    }

    /// Adds a warning to a passing `/readyz` (200, `ok` and then `warning: …`): something an
    /// operator must know that restarting or unreadying the pod would not mend.
    pub fn readyz_warning(
        mut self,
        warning: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Endpoints {
        self.readyz_warning = Arc::new(warning);
        self
    }

    /// The routes, for serving elsewhere or for in-process tests.
    pub fn into_router(self) -> Router {
        Router::new()
            .route(metrics_path(), get(metrics_page))
            .route("/healthz", get(healthz))
            // The upstream sidecars' liveness probe path (csi-lib-utils' leader-election check):
            // a manifest written for them probes it, and gets the same check as /healthz.
            .route(LEADER_ELECTION_HEALTHZ, get(healthz))
            .route("/readyz", get(readyz))
            .with_state(self)
    }
}

/// A check that passes while `flag` is true and otherwise fails with `reason`.
pub fn flag_check(
    flag: Arc<AtomicBool>,
    reason: &'static str,
) -> impl Fn() -> std::result::Result<(), NotReady> + Send + Sync + 'static {
    move || {
        if flag.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(NotReady::from(reason))
        }
    }
}

async fn metrics_page(State(e): State<Endpoints>, headers: HeaderMap) -> impl IntoResponse {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let page = exposition::page(accept, |format| (e.metrics)(format));
    ([(header::CONTENT_TYPE, page.content_type)], page.body)
}

fn answer(check: &Check) -> (StatusCode, String) {
    match check() {
        Ok(()) => (StatusCode::OK, "ok".to_string()),
        Err(NotReady(reason)) => (StatusCode::SERVICE_UNAVAILABLE, reason),
    }
}

async fn healthz(State(e): State<Endpoints>) -> (StatusCode, String) {
    answer(&e.healthz)
}

async fn readyz(State(e): State<Endpoints>) -> (StatusCode, String) {
    let (code, mut body) = answer(&e.readyz);
    if code == StatusCode::OK
        && let Some(warning) = (e.readyz_warning)()
    {
        body.push_str(&format!("\nwarning: {warning}"));
    }
    (code, body)
}

/// The endpoint bound to its address and not yet serving.
#[derive(Debug)]
pub struct BoundEndpoint {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    router: Router,
}

impl BoundEndpoint {
    /// Binds `addr` (port 0 picks a free port) and logs the address actually bound.
    pub async fn bind(addr: SocketAddr, endpoints: Endpoints) -> Result<BoundEndpoint> {
        let fail = |source| Error::Bind {
            addr: addr.to_string(),
            source,
        };
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(fail)?;
        let bound = listener.local_addr().map_err(fail)?;
        // Tests and operators find the port in this line when port 0 was asked for.
        tracing::info!(
            "serving {}, /healthz and /readyz on http://{bound}",
            metrics_path()
        );
        Ok(BoundEndpoint {
            listener,
            addr: bound,
            router: endpoints.into_router(),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes; a failure is logged, since nothing waits on this.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        if let Err(e) = axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %e, addr = %self.addr, "the metrics and health endpoint stopped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    async fn get(base: &str, path: &str) -> (u16, String, String) {
        let resp = reqwest::get(format!("{base}{path}")).await.unwrap();
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (status, content_type, resp.text().await.unwrap())
    }

    #[tokio::test]
    async fn serves_the_three_paths_over_http() {
        let mut registry = Registry::default();
        let hits = Counter::<u64>::default();
        registry.register("test_hits", "Hits", hits.clone());
        hits.inc_by(3);
        let live = Arc::new(AtomicBool::new(true));
        let ready = Arc::new(AtomicBool::new(false));
        let endpoints = Endpoints::from_registry(Arc::new(registry))
            .healthz(flag_check(live.clone(), "dead"))
            .readyz(flag_check(ready.clone(), "warming up"));
        let bound = BoundEndpoint::bind("127.0.0.1:0".parse().unwrap(), endpoints)
            .await
            .unwrap();
        let addr = bound.local_addr();
        assert_ne!(addr.port(), 0);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(bound.serve(async {
            let _ = stop_rx.await;
        }));
        let base = format!("http://{addr}");

        let (code, content_type, body) = get(&base, "/metrics").await;
        assert_eq!(code, 200);
        assert_eq!(content_type, crate::negotiation::PROMETHEUS_TEXT);
        assert!(
            body.contains("# TYPE test_hits_total counter\ntest_hits_total 3\n"),
            "{body}"
        );
        let resp = reqwest::Client::new()
            .get(format!("{base}/metrics"))
            .header("accept", "application/openmetrics-text; version=1.0.0")
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.headers()["content-type"].to_str().unwrap(),
            metrics_text::CONTENT_TYPE
        );
        let body = resp.text().await.unwrap();
        assert!(
            body.contains("# TYPE test_hits counter\ntest_hits_total 3\n"),
            "{body}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");

        assert_eq!(get(&base, "/healthz").await, (200, ct(), "ok".into()));
        assert_eq!(
            get(&base, LEADER_ELECTION_HEALTHZ).await,
            (200, ct(), "ok".into()),
            "the upstream sidecars' probe path answers as /healthz"
        );
        let (code, _, body) = get(&base, "/readyz").await;
        assert_eq!((code, body.as_str()), (503, "warming up"));

        ready.store(true, Ordering::Release);
        live.store(false, Ordering::Release);
        let (code, _, body) = get(&base, "/readyz").await;
        assert_eq!((code, body.as_str()), (200, "ok"));
        let (code, _, body) = get(&base, "/healthz").await;
        assert_eq!((code, body.as_str()), (503, "dead"));
        assert_eq!(get(&base, "/nothing").await.0, 404);

        stop_tx.send(()).unwrap();
        server.await.unwrap();
        assert!(reqwest::get(format!("{base}/healthz")).await.is_err());
    }

    fn ct() -> String {
        "text/plain; charset=utf-8".into()
    }

    #[test]
    fn metrics_paths_are_checked() {
        assert!(set_metrics_path("metrics").is_err());
        assert!(set_metrics_path("/healthz").is_err());
        assert!(set_metrics_path("/{x}").is_err());
    }

    #[tokio::test]
    async fn a_taken_address_is_an_error_naming_it() {
        let first = BoundEndpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            Endpoints::new(|_| String::new()),
        )
        .await
        .unwrap();
        let taken = first.local_addr();
        let err = BoundEndpoint::bind(taken, Endpoints::new(|_| String::new()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(&taken.to_string()), "{err}");
    }
}
