//! `status --watch`: watch PVCs, pods, CSINodes (and PVs, for driver names) and redraw when the
//! findings change. On a terminal the table is redrawn in place (and refreshed for the AGE
//! column); piped, each change appends a new frame (JSON: one document per line).

use crate::error::{Error, Result};
use crate::findings::Snapshot;
use crate::kubeconfig::{Connection, root_cause};
use crate::render::Format;
use crate::scope::{LIST_PAGE, Scope};
use crate::view::{Style, View, frame};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use kube::Api;
use kube::api::ListParams;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use std::io::Write;
use std::pin::Pin;
use std::time::Duration;
use volhealth_kube_access::watch::WatchKind;

/// How long to wait for more events before drawing, so a burst draws once.
const SETTLE: Duration = Duration::from_millis(150);
/// The longest a burst of events is drained before drawing, so a steady stream still draws.
const MAX_DRAIN: Duration = Duration::from_secs(1);
/// How often a terminal table is redrawn anyway, so AGE keeps counting.
const AGE_REFRESH: Duration = Duration::from_secs(5);
/// While watches fail, how often the API server is asked whether it answers again.
const RECHECK: Duration = Duration::from_secs(2);
/// How long one such question may take.
const RECHECK_TIMEOUT: Duration = Duration::from_secs(5);

struct Stores {
    pvcs: Store<PersistentVolumeClaim>,
    pods: Store<Pod>,
    csinodes: Store<CSINode>,
    pvs: Store<PersistentVolume>,
    csidrivers: Store<CSIDriver>,
}

impl Stores {
    fn snapshot(&self) -> Snapshot {
        fn own<K: Clone>(v: Vec<std::sync::Arc<K>>) -> Vec<K> {
            v.into_iter().map(|a| (*a).clone()).collect()
        }
        Snapshot {
            pvcs: own(self.pvcs.state()),
            pods: own(self.pods.state()),
            csinodes: own(self.csinodes.state()),
            pvs: own(self.pvs.state()),
            csidrivers: own(self.csidrivers.state()),
        }
    }
}

/// The APIs the watches read, in scope.
#[derive(Clone)]
struct Apis {
    pvcs: Api<PersistentVolumeClaim>,
    pods: Api<Pod>,
    csinodes: Api<CSINode>,
    pvs: Api<PersistentVolume>,
    csidrivers: Api<CSIDriver>,
}

impl Apis {
    /// Whether the API server answers the list request the watch of `what` starts with (one
    /// object of it, in scope). A watch that comes back where it left off brings no event when
    /// nothing changed meanwhile, so this is how the end of an outage is seen then.
    async fn answers(&self, what: &str, selector: Option<&str>) -> bool {
        let mut params = ListParams::default().limit(1);
        if let Some(sel) = selector {
            params = params.labels(sel);
        }
        let cluster = ListParams::default().limit(1);
        let asked = async {
            match what {
                PVCS => self.pvcs.list_metadata(&params).await.is_ok(),
                PODS => self.pods.list_metadata(&params).await.is_ok(),
                CSINODES => self.csinodes.list_metadata(&cluster).await.is_ok(),
                PVS => self.pvs.list_metadata(&cluster).await.is_ok(),
                CSIDRIVERS => self.csidrivers.list_metadata(&cluster).await.is_ok(),
                _ => false,
            }
        };
        tokio::time::timeout(RECHECK_TIMEOUT, asked)
            .await
            .unwrap_or(false)
    }
}

const PVCS: &str = "PersistentVolumeClaims";
const PODS: &str = "Pods";
const CSINODES: &str = "CSINodes";
const PVS: &str = "PersistentVolumes";
const CSIDRIVERS: &str = "CSIDrivers";

/// A watch's failure: what it watches, and the innermost cause (a refused connection, a
/// 403), which says more than the client library's wrapping of it.
struct WatchError {
    what: &'static str,
    cause: String,
}

type Changes = Pin<Box<dyn Stream<Item = Result<&'static str, WatchError>> + Send>>;

fn watch_into<K: WatchKind>(
    api: Api<K>,
    what: &'static str,
    selector: Option<&str>,
) -> (Store<K>, Changes) {
    let (store, writer) = reflector::store();
    let mut config = watcher::Config::default().page_size(LIST_PAGE);
    if let Some(sel) = selector {
        config = config.labels(sel);
    }
    let stream = reflector::reflector(writer, watcher(api, config))
        .default_backoff()
        .map(move |r| {
            r.map(|_| what).map_err(|e| WatchError {
                what,
                cause: root_cause(&e),
            })
        });
    (store, stream.boxed())
}

fn draw<W: Write>(out: &mut W, text: &str, in_place: bool, format: Format) -> Result<()> {
    if in_place {
        // Clear the screen and home the cursor, then a header line like `watch` prints.
        write!(
            out,
            "\x1b[2J\x1b[H{}\n\n{text}",
            jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S UTC")
        )
    } else {
        match format {
            Format::Json => write!(out, "{text}"),
            Format::Yaml => write!(out, "---\n{text}"),
            Format::Table | Format::Wide => writeln!(out, "{text}"),
        }
    }
    .and_then(|()| out.flush())
    .map_err(Error::Write)
}

/// The watches that are failing now. While an outage lasts, every watch fails on every retry:
/// the user is told once when it starts and once when all answer again.
#[derive(Default)]
struct Failures {
    failing: std::collections::BTreeSet<&'static str>,
}

impl Failures {
    /// Takes one item of the watches in; `true` when it is a change to draw.
    fn note(&mut self, item: Result<&'static str, WatchError>) -> bool {
        match item {
            Err(e) => {
                if self.failing.is_empty() {
                    eprintln!(
                        "volhealth: warning: watching {} failed: {}; retrying until the API server answers (not repeated)",
                        e.what, e.cause
                    );
                }
                self.failing.insert(e.what);
                false
            }
            Ok(what) => {
                self.answered(what);
                true
            }
        }
    }

    /// The watch of `what` works again; the user is told when it was the last one failing.
    fn answered(&mut self, what: &str) {
        if self.failing.remove(what) && self.failing.is_empty() {
            eprintln!("volhealth: the API server answers again; watching");
        }
    }
}

/// Runs the watch loop until `shutdown` completes (the binary's Ctrl-C or SIGTERM), writing each
/// frame to `out`. `first` is what the initial list found; `in_place`: redraw the screen (a table
/// on a terminal).
pub async fn run<W: Write>(
    conn: Connection,
    scope: Scope,
    style: Style,
    first: View,
    in_place: bool,
    out: &mut W,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    draw(
        out,
        &frame(&first, &scope, style, true)?,
        in_place,
        style.format,
    )?;
    let mut last = first;

    let sel = scope.selector.as_deref();
    let apis = Apis {
        pvcs: scope.api::<PersistentVolumeClaim>(&conn.client),
        pods: scope.api::<Pod>(&conn.client),
        csinodes: Api::all(conn.client.clone()),
        pvs: Api::all(conn.client.clone()),
        csidrivers: Api::all(conn.client.clone()),
    };
    let (pvcs, s1) = watch_into(apis.pvcs.clone(), PVCS, sel);
    let (pods, s2) = watch_into(apis.pods.clone(), PODS, sel);
    let (csinodes, s3) = watch_into(apis.csinodes.clone(), CSINODES, None);
    let (pvs, s4) = watch_into(apis.pvs.clone(), PVS, None);
    let (csidrivers, s5) = watch_into(apis.csidrivers.clone(), CSIDRIVERS, None);
    let stores = Stores {
        pvcs,
        pods,
        csinodes,
        pvs,
        csidrivers,
    };
    let mut changes = futures::stream::select_all([s1, s2, s3, s4, s5]);

    tokio::pin!(shutdown);
    let mut refresh = tokio::time::interval(AGE_REFRESH);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failures = Failures::default();
    loop {
        let mut force = false;
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = refresh.tick() => force = in_place,
            _ = recheck.tick(), if !failures.failing.is_empty() => {
                let failing: Vec<&'static str> = failures.failing.iter().copied().collect();
                let asked = futures::future::join_all(failing.iter().map(|w| apis.answers(w, sel)));
                tokio::select! {
                    _ = &mut shutdown => return Ok(()),
                    answers = asked => {
                        for (what, answers) in failing.into_iter().zip(answers) {
                            if answers {
                                failures.answered(what);
                            }
                        }
                    }
                }
                continue;
            }
            item = changes.next() => match item {
                None => return Err(Error::WatchesEnded),
                Some(item) => {
                    let mut changed = failures.note(item);
                    // Drain the rest of a burst before drawing (errors included: during an
                    // outage they keep coming, and each must still be noted).
                    let drain_until = tokio::time::Instant::now() + MAX_DRAIN;
                    while let Ok(Ok(Some(item))) = tokio::time::timeout_at(
                        drain_until,
                        tokio::time::timeout(SETTLE, changes.next()),
                    )
                    .await
                    {
                        changed |= failures.note(item);
                    }
                    if !changed {
                        continue;
                    }
                }
            },
        }
        // PVs only add driver names and CSIDrivers what watches the controller side (either may
        // be forbidden), so they are not waited for.
        let ready = futures::future::join3(
            stores.pvcs.wait_until_ready(),
            stores.pods.wait_until_ready(),
            stores.csinodes.wait_until_ready(),
        );
        if let Some((Ok(()), Ok(()), Ok(()))) = futures::FutureExt::now_or_never(ready) {
            let now = View::of(&stores.snapshot());
            if force || now != last {
                draw(
                    out,
                    &frame(&now, &scope, style, true)?,
                    in_place,
                    style.format,
                )?;
                last = now;
            }
        }
    }
}
