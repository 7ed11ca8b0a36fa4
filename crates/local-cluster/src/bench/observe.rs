//! Watches the PVCs, pods and CSINodes and records, with the time it was seen, every change of
//! whether an object carries a health condition: what the lags and curves are computed from.

use crate::failure::{Result, ensure};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use volhealth_kube_access::objects::storage_health;
use volhealth_kube_access::watch::WatchKind;

/// Which status a condition is written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `pvc.status.healthStatus`, written by the monitor.
    Controller,
    /// `pod.status.volumeHealth`, written by an agent.
    NodeVolume,
    /// `csinode.status.storageHealth`, written by an agent.
    NodeStorage,
}

/// One observed change.
#[derive(Debug, Clone)]
pub struct Transition {
    /// When the watch delivered it.
    pub at: Instant,
    /// Which status.
    pub kind: Kind,
    /// The object's name.
    pub name: String,
    /// Whether it now carries a condition.
    pub unhealthy: bool,
}

#[derive(Default)]
struct State {
    current: HashMap<(Kind, String), bool>,
    log: Vec<Transition>,
    synced: HashMap<Kind, bool>,
}

/// The shared record of all three watches; dropping it stops them.
#[derive(Default)]
pub struct Observer {
    state: Arc<Mutex<State>>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Drop for Observer {
    fn drop(&mut self) {
        for t in self
            .tasks
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}

/// The reason of every condition the bench injects; conditions the driver finds by itself (a
/// nearly full disk) are not the bench's and do not count.
pub const REASON: &str = "BenchOutage";

fn pvc_unhealthy(p: &PersistentVolumeClaim) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.health_status.as_ref())
        .and_then(|h| h.health_conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.reason == REASON))
}

fn pod_unhealthy(p: &Pod) -> bool {
    let volumes = p
        .status
        .iter()
        .flat_map(|s| s.volume_health.iter().flatten());
    volumes
        .flat_map(|v| v.health_conditions.iter().flatten())
        .any(|c| c.reason == REASON)
}

fn csinode_unhealthy(n: &CSINode) -> bool {
    storage_health(n)
        .iter()
        .flat_map(|s| s.health_conditions.iter().flatten())
        .any(|c| c.reason == REASON)
}

impl Observer {
    /// Starts the three watches; returns once each has listed what exists.
    pub async fn start(client: &kube::Client, namespace: &str) -> Result<Observer> {
        let me = Observer::default();
        me.spawn(
            Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace),
            Kind::Controller,
            pvc_unhealthy,
        );
        me.spawn(
            Api::<Pod>::namespaced(client.clone(), namespace),
            Kind::NodeVolume,
            pod_unhealthy,
        );
        me.spawn(
            Api::<CSINode>::all(client.clone()),
            Kind::NodeStorage,
            csinode_unhealthy,
        );
        let deadline = Instant::now() + Duration::from_secs(120);
        while !me.synced() {
            ensure!(
                Instant::now() < deadline,
                "the bench's watches did not list the objects within 120 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(me)
    }

    fn synced(&self) -> bool {
        let s = self.lock();
        [Kind::Controller, Kind::NodeVolume, Kind::NodeStorage]
            .iter()
            .all(|k| s.synced.get(k).copied().unwrap_or(false))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn<K: WatchKind>(&self, api: Api<K>, kind: Kind, unhealthy: fn(&K) -> bool) {
        let state = self.state.clone();
        let task = tokio::spawn(async move {
            // With backoff: a watch whose server went away must not spin.
            let mut events =
                std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            while let Some(event) = events.next().await {
                let now = Instant::now();
                let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
                let (obj, sick) = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        let sick = unhealthy(&o);
                        (o, sick)
                    }
                    Ok(watcher::Event::Delete(o)) => (o, false),
                    Ok(watcher::Event::InitDone) => {
                        s.synced.insert(kind, true);
                        continue;
                    }
                    Ok(watcher::Event::Init) | Err(_) => continue,
                };
                let name = obj.meta().name.clone().unwrap_or_default();
                let before = s
                    .current
                    .insert((kind, name.clone()), sick)
                    .unwrap_or(false);
                if before != sick {
                    s.log.push(Transition {
                        at: now,
                        kind,
                        name,
                        unhealthy: sick,
                    });
                }
            }
        });
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task.abort_handle());
    }

    /// How many objects of `kind` carry a condition now.
    pub fn unhealthy_count(&self, kind: Kind) -> usize {
        self.lock()
            .current
            .iter()
            .filter(|((k, _), sick)| *k == kind && **sick)
            .count()
    }

    /// When `name` first reached `unhealthy` at or after `since`.
    pub fn first(
        &self,
        kind: Kind,
        name: &str,
        unhealthy: bool,
        since: Instant,
    ) -> Option<Instant> {
        self.lock()
            .log
            .iter()
            .find(|t| t.kind == kind && t.unhealthy == unhealthy && t.at >= since && t.name == name)
            .map(|t| t.at)
    }

    /// Every transition of `kind` to `unhealthy` at or after `since`, seconds after `since`,
    /// each object counted once (its first), sorted.
    pub fn curve(&self, kind: Kind, unhealthy: bool, since: Instant) -> Vec<f64> {
        let s = self.lock();
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<f64> = s
            .log
            .iter()
            .filter(|t| t.kind == kind && t.unhealthy == unhealthy && t.at >= since)
            .filter(|t| seen.insert(t.name.clone()))
            .map(|t| t.at.duration_since(since).as_secs_f64())
            .collect();
        out.sort_by(f64::total_cmp);
        out
    }

    /// Waits until `done` holds or `timeout` passes; says whether it held.
    pub async fn wait(&self, timeout: Duration, mut done: impl FnMut(&Observer) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
