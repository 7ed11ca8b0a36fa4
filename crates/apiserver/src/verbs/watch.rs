//! Watch: newline-delimited JSON events over a chunked response. Resumes from any
//! resourceVersion still in the SQLite change log (also across restarts); an expired one gets a
//! single ERROR event carrying a 410 Status, as the real server's cacher answers.

use crate::errors::{ApiError, qualified};
use crate::http::state::AppState;
use crate::kinds::selectors::{FieldSelector, LabelSelector};
use crate::registry::ResourceDef;
use crate::storage::backlog::{self, Backlog, Sent};
use crate::storage::store::{Change, ChangeKind};
use crate::wire::request::{self, Format, Target};
use crate::wire::table;
use axum::body::Bytes;
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

fn encode(ev: &Value) -> Bytes {
    let mut line = serde_json::to_vec(ev).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// Default lifetime of a watch without `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Filter {
    def: &'static ResourceDef,
    ns: Option<String>,
    label: LabelSelector,
    field: FieldSelector,
}

impl Filter {
    fn matches(&self, ns: &str, obj: &Value) -> bool {
        let view = crate::kinds::convert::from_storage(self.def, obj);
        self.ns.as_deref().is_none_or(|n| n == ns)
            && self.label.matches(&view)
            && self.field.matches(&view)
    }

    /// The event a change becomes for this watcher, following objects into and out of the selection.
    fn event<'a>(&self, c: &'a Change) -> Option<(&'static str, &'a Value)> {
        let now = self.matches(&c.ns, &c.object);
        let before = c.prev.as_deref().is_some_and(|p| self.matches(&c.ns, p));
        match (c.kind, before, now) {
            (ChangeKind::Added, _, true) => Some(("ADDED", &c.object)),
            (ChangeKind::Deleted, _, true) => Some(("DELETED", &c.object)),
            (ChangeKind::Modified, true, true) => Some(("MODIFIED", &c.object)),
            (ChangeKind::Modified, false, true) => Some(("ADDED", &c.object)),
            (ChangeKind::Modified, true, false) => Some(("DELETED", &c.object)),
            _ => None,
        }
    }
}

struct Emitter {
    def: &'static ResourceDef,
    format: Format,
    backlog: Backlog,
    limits: backlog::Limits,
    sent_columns: bool,
    /// Who watches, for the log line when the watcher is terminated.
    user: String,
    st: Arc<AppState>,
}

impl Emitter {
    async fn send(&mut self, ty: &str, obj: &Value) -> bool {
        let obj = &*crate::kinds::convert::from_storage(self.def, obj);
        let object = match self.format {
            Format::Json => obj.clone(),
            Format::Partial => table::partial_metadata(obj),
            Format::Table(inc) => {
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                let t = table::table(self.def.printer, &[obj], rv, inc, !self.sent_columns);
                self.sent_columns = true;
                t
            }
        };
        self.raw(&json!({"type": ty, "object": object})).await
    }

    async fn raw(&mut self, ev: &Value) -> bool {
        match self.backlog.send(encode(ev)).await {
            Sent::Queued => true,
            Sent::Closed => false,
            Sent::TooSlow => {
                let resource = qualified(self.def.group, self.def.plural);
                tracing::warn!(
                    user = %self.user,
                    resource = %resource,
                    "terminated a watcher that left {} events or {} bytes unread for {:?}",
                    self.limits.events,
                    self.limits.bytes,
                    self.limits.patience
                );
                self.st.metrics.terminated_watcher(&resource);
                let e = ApiError::expired(format!(
                    "the watch fell behind: its client left more than {} events or {} bytes \
                     unread for {:?}; list again",
                    self.limits.events, self.limits.bytes, self.limits.patience
                ));
                self.backlog
                    .terminate(encode(&json!({"type": "ERROR", "object": e.status_json()})));
                false
            }
        }
    }

    async fn bookmark(&mut self, rv: u64, initial_end: bool) -> bool {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let ev = json!({"type": "BOOKMARK", "object": {"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": meta}});
        self.raw(&ev).await
    }

    async fn expired(&mut self, message: String) -> bool {
        let e = ApiError::expired(message);
        self.raw(&json!({"type": "ERROR", "object": e.status_json()}))
            .await
    }
}

struct Plan {
    res: String,
    filter: Filter,
    from: Option<u64>,
    initial_events: bool,
    bookmarks: bool,
    timeout: Duration,
}

/// Starts a watch for `user` and returns the streaming response.
pub fn start(
    st: Arc<AppState>,
    t: &Target,
    query: &HashMap<String, String>,
    accept: &str,
    user: &str,
) -> Result<Response, ApiError> {
    let q = |k: &str| query.get(k).map(String::as_str).filter(|s| !s.is_empty());
    let (label, mut field) = crate::verbs::query::selectors(t.def, query)?;
    if let Some(name) = &t.name {
        field = FieldSelector::parse(&format!("metadata.name={name}"), t.def)?;
    }
    let from = match q("resourceVersion") {
        None | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let initial_events = request::parse_bool(q("sendInitialEvents"));
    let timeout = q("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    let plan = Plan {
        res: t.def.store_name(),
        filter: Filter {
            def: t.def,
            ns: (t.def.namespaced && !t.ns.is_empty()).then(|| t.ns.clone()),
            label,
            field,
        },
        from,
        initial_events,
        bookmarks: request::parse_bool(q("allowWatchBookmarks")),
        timeout,
    };
    let (backlog, body) = backlog::channel(st.watch_backlog);
    let emitter = Emitter {
        def: t.def,
        format: request::format(accept, q("includeObject")),
        backlog,
        limits: st.watch_backlog,
        sent_columns: false,
        user: user.to_string(),
        st: st.clone(),
    };
    // Subscribe before reading the snapshot or the log, so no change falls in between.
    let live = st.store.subscribe();
    tokio::spawn(run(st, plan, emitter, live));
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(body)
        .map_err(|e| ApiError::internal(format!("building the watch response: {e}")))
}

async fn replay(
    st: &AppState,
    plan: &Plan,
    em: &mut Emitter,
    after: u64,
    last: &mut u64,
) -> Result<bool, ()> {
    let store = st.store.clone();
    let res = plan.res.clone();
    let changes = tokio::task::spawn_blocking(move || store.changes_since(&res, after))
        .await
        .map_err(|_| ())?;
    match changes {
        Ok(Some(list)) => {
            for c in &list {
                if c.rv <= *last {
                    continue;
                }
                if let Some((ty, obj)) = plan.filter.event(c)
                    && !em.send(ty, obj).await
                {
                    return Err(());
                }
                *last = c.rv;
            }
            Ok(true)
        }
        Ok(None) => {
            let oldest = st.store.compacted() + 1;
            let _ = em
                .expired(format!("too old resource version: {after} ({oldest})"))
                .await;
            Ok(false)
        }
        Err(e) => {
            tracing::warn!("watch replay of {} failed: {e}", plan.res);
            let _ = em.raw(&json!({"type": "ERROR", "object": ApiError::internal(e.to_string()).status_json()})).await;
            Ok(false)
        }
    }
}

async fn run(
    st: Arc<AppState>,
    plan: Plan,
    mut em: Emitter,
    mut live: broadcast::Receiver<Arc<Change>>,
) {
    let mut shutdown = st.shutdown.clone();
    // `last` is the resourceVersion up to which this watcher has seen every change.
    let mut last: u64;
    match plan.from {
        Some(rv) if !plan.initial_events => {
            // A version from the future (say, the data directory was replaced): make the client
            // list again rather than silently skip changes.
            let current = st.store.current_rv();
            if rv > current {
                let _ = em
                    .expired(format!(
                        "too large resource version: {rv} (current {current})"
                    ))
                    .await;
                return;
            }
            last = rv;
            match replay(&st, &plan, &mut em, rv, &mut last).await {
                Ok(true) => {}
                _ => return,
            }
        }
        _ => {
            let ns = plan.filter.ns.as_deref();
            let (rv, items) = st.store.list(&plan.res, ns);
            last = rv;
            for o in items.iter().filter(|o| {
                let ons = o
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                plan.filter.matches(ons, o)
            }) {
                if !em.send("ADDED", o).await {
                    return;
                }
            }
            if plan.initial_events && plan.bookmarks && !em.bookmark(rv, true).await {
                return;
            }
        }
    }
    let deadline = tokio::time::sleep(plan.timeout);
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(st.bookmark_interval.max(Duration::from_millis(100)));
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            _ = shutdown.changed() => return,
            _ = em.backlog.closed() => return,
            _ = ticker.tick(), if plan.bookmarks => {
                if !em.bookmark(last, false).await {
                    return;
                }
            }
            msg = live.recv() => match msg {
                Ok(c) => {
                    if c.rv <= last {
                        continue;
                    }
                    if c.res == plan.res
                        && let Some((ty, obj)) = plan.filter.event(&c)
                        && !em.send(ty, obj).await
                    {
                        return;
                    }
                    last = c.rv;
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let from = last;
                    match replay(&st, &plan, &mut em, from, &mut last).await {
                        Ok(true) => {}
                        _ => return,
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
