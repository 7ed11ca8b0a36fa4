//! The HTTP front: routing of non-resource paths, authentication, body limits, metrics, and the
//! `serve` entry point.

use crate::errors::{ApiError, Error, Result};
use crate::http::call::{self, Call};
use crate::http::connections::default_max_connections;
use crate::http::response::{error_response, json_response, json_response_typed, text};
use crate::http::state::AppState;
use crate::kinds::gate::FeatureGates;
use crate::metrics::Metrics;
use crate::security::authz::{self, Authorizer, Request as AuthzRequest, Tokens, User};
use crate::storage::store::Store;
use crate::wire::request::{self, Route};
use crate::{http::connections, security::kubeconfig, security::tls, verbs::rest, wire::discovery};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use futures::StreamExt;
use serde_json::json;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use volhealth_daemon::in_progress_layer::InProgressLayer;

/// Largest accepted request body (as kube-apiserver: 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;
/// Longest accepted request target (path and query), in bytes.
pub const MAX_URI: usize = 32 * 1024;
/// Largest accepted request head (target and headers), in bytes.
pub const MAX_HEAD: usize = 256 * 1024;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Directory of the SQLite database.
    pub data_dir: PathBuf,
    /// Feature gates.
    pub gates: FeatureGates,
    /// Static tokens; None serves every request as `system:anonymous`.
    pub tokens: Option<Tokens>,
    /// The authorizer chain (`--authorization-mode`); the default is `Node,RBAC`.
    pub authorization: Authorizer,
    /// Write a kubeconfig here once the listener is bound.
    pub write_kubeconfig: Option<PathBuf>,
    /// How many changes the watch log keeps at least.
    pub retained_changes: u64,
    /// Interval of watch bookmarks (when the client allows them).
    pub bookmark_interval: Duration,
    /// Most connections served at once; when all are taken, the oldest that has sent no request
    /// yet is closed for a new one, else new ones wait until one closes. The default leaves a
    /// reserve of the open-files limit for the store and the server's own files
    /// ([`default_max_connections`]).
    pub max_connections: usize,
    /// Time a client has to send a request's head, and the longest a kept-alive connection
    /// may idle between requests. A new connection's TLS handshake and first head have at most
    /// [`crate::FIRST_REQUEST_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// Bytes of events one watcher may leave unread before it counts as slow.
    pub watch_backlog_bytes: usize,
    /// Events one watcher may leave unread before it counts as slow.
    pub watch_backlog_events: usize,
    /// How long a slow watcher's backlog may stay full before it is terminated (what it held
    /// is dropped, and its stream ends with a 410).
    pub slow_watcher_patience: Duration,
    /// TLS and client certificates; None serves plain HTTP.
    pub tls: Option<tls::TlsConfig>,
}

impl ServerConfig {
    /// Defaults for a data directory: gate on, no tokens, `Node,RBAC`, 50k retained changes, 10 s bookmarks,
    /// as many connections as the open-files limit allows, 32 s to send a request head (as
    /// kube-apiserver), [`crate::WATCH_QUEUE_EVENTS`] events and [`crate::WATCH_QUEUE_BYTES`] of
    /// unread events per watcher for at most 10 s, plain HTTP (`volhealth apiserver` turns TLS on
    /// unless told `--insecure-http`).
    pub fn new(data_dir: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            data_dir: data_dir.into(),
            gates: FeatureGates::default(),
            tokens: None,
            authorization: Authorizer::default(),
            write_kubeconfig: None,
            retained_changes: 50_000,
            bookmark_interval: Duration::from_secs(10),
            max_connections: default_max_connections(),
            header_read_timeout: Duration::from_secs(32),
            watch_backlog_bytes: crate::storage::backlog::WATCH_QUEUE_BYTES,
            watch_backlog_events: crate::storage::backlog::WATCH_QUEUE_EVENTS,
            slow_watcher_patience: Duration::from_secs(10),
            tls: None,
        }
    }
}

const NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

fn seed(store: &Store) -> std::result::Result<(), ApiError> {
    let Some(def) = crate::registry::find("", "v1", "namespaces") else {
        return Ok(());
    };
    for ns in NAMESPACES {
        if store.get(&def.store_name(), "", ns).is_some() {
            continue;
        }
        let mut obj = json!({"metadata": {"name": ns}});
        crate::kinds::objects::prepare_create(def, &mut obj, "")?;
        store.mutate(&def.store_name(), "", ns, |old| {
            Ok(if old.is_some() {
                crate::storage::store::Outcome::Unchanged
            } else {
                crate::storage::store::Outcome::Put(obj)
            })
        })?;
    }
    Ok(())
}

/// Serves the API on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let addr = listener.local_addr().map_err(|source| Error::Io {
        what: "reading the listener's address".into(),
        source,
    })?;
    let data_dir = config.data_dir.clone();
    let retain = config.retained_changes;
    let store = tokio::task::spawn_blocking(move || Store::open(&data_dir, retain))
        .await
        .map_err(|e| Error::Task {
            what: "opening the store",
            reason: e.to_string(),
        })??;
    let store = Arc::new(store);
    let seed_store = store.clone();
    let rbac = config.authorization.has(authz::Mode::Rbac);
    tokio::task::spawn_blocking(move || {
        seed(&seed_store)?;
        if rbac {
            authz::bootstrap::ensure(&seed_store)?;
        }
        Ok::<(), ApiError>(())
    })
    .await
    .map_err(|e| Error::Task {
        what: "creating the built-in namespaces and policy",
        reason: e.to_string(),
    })?
    .map_err(|e| Error::Task {
        what: "creating the built-in namespaces and policy",
        reason: e.message,
    })?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let state = Arc::new(AppState {
        store,
        gates: config.gates,
        tokens: config.tokens.clone(),
        authorizer: config.authorization.clone(),
        metrics: Metrics::default(),
        bookmark_interval: config.bookmark_interval,
        address: addr.to_string(),
        watch_backlog: crate::storage::backlog::Limits {
            bytes: config.watch_backlog_bytes,
            events: config.watch_backlog_events.max(1),
            patience: config.slow_watcher_patience,
        },
        shutdown: stop_rx,
    });
    // Each request is named by a shutdown the watchdog has to cut off while it is answered.
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(state)
        .layer(InProgressLayer::new(|method, uri| {
            format!("the request {method} {}", uri.path())
        }));
    let serving = match &config.tls {
        Some(t) => Some(tls::prepare(&config.data_dir, t)?),
        None => None,
    };
    let url = match serving {
        Some(_) => format!("https://{addr}"),
        None => format!("http://{addr}"),
    };
    if let Some(path) = &config.write_kubeconfig {
        let kc = kubeconfig::Kubeconfig {
            server: url.clone(),
            ca_pem: serving.as_ref().map(|s| s.trust_pem.clone()),
            token: config
                .tokens
                .as_ref()
                .and_then(|t| t.first())
                .map(str::to_string),
            client_cert: None,
        };
        kubeconfig::write(path, &kc)?;
    }
    tracing::info!("listening on {url}");
    let graceful = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    let limits = connections::Limits {
        max_connections: config.max_connections,
        header_read_timeout: config.header_read_timeout,
    };
    connections::serve(listener, app, limits, serving, graceful).await;
    Ok(())
}

fn header<'a>(parts: &'a http::request::Parts, name: &str) -> &'a str {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn read_body(
    parts: &http::request::Parts,
    body: Body,
) -> std::result::Result<Bytes, ApiError> {
    let declared = parts
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut stream = body.into_data_stream();
    if declared.is_some_and(|len| len > MAX_BODY) {
        return Err(discard_oversized(stream, 0).await);
    }
    let mut buf = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
        if buf.len() + chunk.len() > MAX_BODY {
            return Err(discard_oversized(stream, buf.len() + chunk.len()).await);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buf))
}

/// How much of an oversized body is read and thrown away before answering 413: a client that
/// is still sending when the connection closes sees a reset instead of the answer.
const DISCARD_LIMIT: usize = 64 * 1024 * 1024;

/// Reads and drops the rest of an oversized body (up to [`DISCARD_LIMIT`]), then gives the 413.
async fn discard_oversized(stream: axum::body::BodyDataStream, seen: usize) -> ApiError {
    discard(stream, seen).await;
    ApiError::too_large()
}

/// Reads and drops the rest of a body nobody will look at (up to [`DISCARD_LIMIT`]), so that the
/// client gets to read the answer.
async fn discard(mut stream: axum::body::BodyDataStream, mut seen: usize) {
    while seen <= DISCARD_LIMIT {
        match stream.next().await {
            Some(Ok(chunk)) => seen += chunk.len(),
            _ => break,
        }
    }
}

/// Refuses a request target longer than [`MAX_URI`] (414) or a head larger than [`MAX_HEAD`]
/// (431), with a Status body, as the HTTP layer would answer without one.
fn head_within_limits(parts: &http::request::Parts) -> std::result::Result<(), ApiError> {
    let target = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path().len(), |pq| pq.as_str().len());
    if target > MAX_URI {
        return Err(ApiError::new(
            414,
            "RequestURITooLong",
            format!("the request URI is {target} bytes long; the limit is {MAX_URI}"),
        ));
    }
    let headers: usize = parts
        .headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if target + headers > MAX_HEAD {
        return Err(ApiError::new(
            431,
            "RequestHeaderFieldsTooLarge",
            format!(
                "the request head is {} bytes; the limit is {MAX_HEAD}",
                target + headers
            ),
        ));
    }
    Ok(())
}

/// What the metrics call the request.
struct Accounting {
    verb: String,
    resource: String,
    subresource: String,
}

async fn handle(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let mut acct = Accounting {
        verb: parts.method.as_str().to_string(),
        resource: String::new(),
        subresource: String::new(),
    };
    let resp = match head_within_limits(&parts) {
        Err(e) => error_response(&e),
        Ok(()) => match dispatch(&st, parts, body, &mut acct).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        },
    };
    st.metrics.observe(
        &acct.verb,
        &acct.resource,
        &acct.subresource,
        resp.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    resp
}

/// The caller the credentials name: the bearer token's user when there is an `Authorization`
/// header (a wrong one is 401 even with a client certificate), else the verified client
/// certificate's user, else None (unless requests without credentials act as the anonymous
/// administrator).
fn authenticate(
    st: &AppState,
    parts: &http::request::Parts,
) -> std::result::Result<Option<User>, ApiError> {
    let header = parts.headers.get("authorization");
    if let (Some(tokens), Some(h)) = (&st.tokens, header) {
        return tokens.authenticate(h.to_str().ok()).map(Some);
    }
    if let Some(user) = parts.extensions.get::<User>() {
        return Ok(Some(user.clone()));
    }
    match &st.tokens {
        None => Ok(None),
        Some(t) => Ok(t.authenticate(None).ok()),
    }
}

async fn dispatch(
    st: &Arc<AppState>,
    parts: http::request::Parts,
    body: Body,
    acct: &mut Accounting,
) -> std::result::Result<Response, ApiError> {
    let raw_path = parts.uri.path();
    let path = if raw_path.len() > 1 {
        raw_path.trim_end_matches('/')
    } else {
        raw_path
    };
    let is_get = parts.method == http::Method::GET || parts.method == http::Method::HEAD;
    let accept = header(&parts, "accept").to_string();
    let authenticated = authenticate(st, &parts)?;
    let route = request::route(path);
    let resource_request = matches!(route, Ok(Route::Resource(_)));
    // With tokens configured, resource requests need credentials; without any, a request is
    // `system:anonymous` (kube-apiserver's anonymous authentication).
    if resource_request && st.tokens.is_some() && authenticated.is_none() {
        return Err(ApiError::unauthorized());
    }
    let requester = authenticated.map_or_else(authz::anonymous, authz::with_authenticated_group);
    let user =
        authz::impersonation::impersonate(&st.authorizer, &st.store, requester, &parts.headers)?;
    if !resource_request {
        let verb = if is_get {
            "get".to_string()
        } else {
            parts.method.as_str().to_ascii_lowercase()
        };
        st.authorizer.authorize(
            &st.store,
            &user,
            &AuthzRequest::Path { verb: &verb, path },
            authz::Binding::Assume(None),
        )?;
    }
    match path {
        "/healthz" | "/readyz" | "/livez" if is_get => {
            return Ok(text(200, "ok".into(), "text/plain; charset=utf-8"));
        }
        "/version" if is_get => return Ok(json_response(200, &discovery::version())),
        "/metrics" if is_get => {
            let page = volhealth_daemon::exposition::page(Some(&accept), |format| {
                st.metrics.families.encode_as(format)
            });
            return Ok(text(200, page.body, page.content_type));
        }
        "/openapi/v2" if is_get => {
            return Ok(text(
                200,
                String::new(),
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            ));
        }
        "/openapi/v3" | "/openapi/v3/" if is_get => {
            return Ok(json_response(200, &crate::wire::openapi::discovery()));
        }
        p if is_get && p.starts_with("/openapi/v3/") => {
            let gv = p.trim_start_matches("/openapi/v3/");
            return crate::wire::openapi::group_version(gv)
                .map(|d| json_response(200, &d))
                .ok_or_else(ApiError::no_route);
        }
        p if p.starts_with("/openapi/") => return Err(ApiError::no_route()),
        "/api" | "/apis" if is_get => {
            let core = path == "/api";
            return Ok(if discovery::wants_aggregated(&accept) {
                json_response_typed(
                    200,
                    &discovery::aggregated(core),
                    discovery::AGGREGATED_CONTENT_TYPE,
                )
            } else if core {
                json_response(200, &discovery::core_versions(&st.address))
            } else {
                json_response(200, &discovery::group_list())
            });
        }
        _ => {}
    }
    match route? {
        Route::ResourceList(g, v) if is_get => discovery::resource_list(&g, &v)
            .map(|d| json_response(200, &d))
            .ok_or_else(ApiError::no_route),
        Route::Group(g) if is_get => discovery::group(&g)
            .map(|d| json_response(200, &d))
            .ok_or_else(ApiError::no_route),
        Route::ResourceList(..) | Route::Group(..) => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
        Route::Resource(target) => {
            let user: Option<User> = Some(user);
            let query = request::parse_query(parts.uri.query());
            let verb = call::verb(
                &parts.method,
                &target,
                &query,
                header(&parts, "content-type"),
            )?;
            acct.verb = verb.metric_name().to_string();
            acct.resource = target.def.plural.to_string();
            acct.subresource = target.sub.clone().unwrap_or_default();
            if let Err(e) = rest::authorize_before_body(st, user.as_ref(), &target, verb) {
                discard(body.into_data_stream(), 0).await;
                return Err(e);
            }
            let body = read_body(&parts, body).await?;
            let call = Call {
                target,
                verb,
                query,
                accept,
                content_type: header(&parts, "content-type").to_string(),
                body,
                user,
            };
            rest::handle(st.clone(), call).await
        }
    }
}
