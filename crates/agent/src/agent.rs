//! The probe loop: every interval, probe the node's volumes and storage backends and write what changed.

use crate::clock::Clock;
use crate::cluster::{ApiFailure, Cluster, PodSource};
use crate::drivers::DriverSet;
use crate::error::{Error, Result};
use crate::kubelet_dirs::KubeletDirs;
use crate::metrics::Metrics;
use crate::pod_volumes::CsiVolume;
use crate::write_backoff::WriteBackoff;
use k8s_openapi::api::core::v1::PodVolumeHealth;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Semaphore;

/// What the probe loop works with; every boundary is a trait so the loop is tested with fakes.
pub struct AgentDeps {
    /// This node's name.
    pub node_name: String,
    /// This node's UID (owner of a CSINode the agent creates), when known.
    pub node_uid: Option<String>,
    /// The Kubernetes API.
    pub cluster: Arc<dyn Cluster>,
    /// Pods bound to this node.
    pub pods: Arc<dyn PodSource>,
    /// The kubelet's directories.
    pub dirs: Arc<dyn KubeletDirs>,
    /// Registered drivers.
    pub drivers: DriverSet,
    /// Time for lastTransitionTime.
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Probe interval.
    pub interval: Duration,
    /// Timeout of each CSI call.
    pub timeout: Duration,
    /// Concurrency bound of CSI calls.
    pub max_concurrent_probes: usize,
}

/// How a pod volume resolved (cached for the pod's life: a pod's claims and their PVs do not change under it).
#[derive(Debug, Clone)]
pub(crate) enum Resolution {
    Csi(CsiVolume),
    NotCsi,
}

#[derive(Debug)]
pub(crate) struct State {
    /// (pod UID, volume name) → resolution.
    pub resolved: HashMap<(String, String), Resolution>,
    /// pod UID → our last write, until the watch catches up with it.
    pub written: HashMap<String, Written>,
    /// pod UID → (namespace, name) of pods seen last cycle.
    pub seen_pods: HashMap<String, (String, String)>,
    pub backoff: WriteBackoff,
    /// Things logged once (unknown conditions, sanitising fixes, resolution failures).
    pub logged: HashSet<String>,
}

/// A pod status write the watch may not have delivered yet.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    /// resourceVersion of the copy the write was based on.
    pub rv_before: Option<String>,
    /// resourceVersion the server returned.
    pub rv_after: Option<String>,
    /// volumeHealth the server returned.
    pub value: Vec<PodVolumeHealth>,
}

impl Written {
    /// Whether a watched copy with `rv` predates this write (so the write's value is the stored one).
    pub fn newer_than(&self, rv: Option<&str>) -> bool {
        if rv == self.rv_after.as_deref() {
            return false;
        }
        let number = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok());
        match (number(rv), number(self.rv_after.as_deref())) {
            (Some(seen), Some(after)) => seen < after,
            // Opaque versions cannot be ordered: only the copy the write was based on is known to be older.
            _ => rv == self.rv_before.as_deref(),
        }
    }
}

/// The node agent's probe loop.
pub struct Agent {
    pub(crate) deps: AgentDeps,
    pub(crate) state: Mutex<State>,
    pub(crate) probes: Semaphore,
}

impl Agent {
    /// A loop over `deps`.
    pub fn new(deps: AgentDeps) -> Agent {
        let backoff = WriteBackoff::new(
            deps.interval,
            (deps.interval * 10).max(Duration::from_secs(300)),
        );
        let permits = deps.max_concurrent_probes.max(1);
        Agent {
            deps,
            state: Mutex::new(State {
                resolved: HashMap::new(),
                written: HashMap::new(),
                seen_pods: HashMap::new(),
                backoff,
                logged: HashSet::new(),
            }),
            probes: Semaphore::new(permits),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps inconsistent in a harmful way: they are caches.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs cycles until an error that must stop the agent (the credentials do not belong to this node).
    pub async fn run(&self) -> Result<()> {
        loop {
            let start = tokio::time::Instant::now();
            self.run_cycle(start).await?;
            tokio::time::sleep_until(start + self.deps.interval).await;
        }
    }

    /// One cycle started at `start`: storage probes at once, volume probes spread over the interval.
    pub async fn run_cycle(&self, start: tokio::time::Instant) -> Result<()> {
        let drivers = self.deps.drivers.snapshot();
        self.forget_gone_pods();
        let (storage, volumes) = futures::join!(
            self.storage_cycle(&drivers),
            self.volume_cycle(&drivers, start)
        );
        storage?;
        volumes
    }

    fn forget_gone_pods(&self) {
        let pods = self.deps.pods.pods();
        let now: HashMap<String, (String, String)> = pods
            .iter()
            .filter_map(|p| {
                Some((
                    p.metadata.uid.clone()?,
                    (
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone()?,
                    ),
                ))
            })
            .collect();
        let mut state = self.state();
        let gone: Vec<(String, (String, String))> = state
            .seen_pods
            .iter()
            .filter(|(uid, _)| !now.contains_key(*uid))
            .map(|(u, k)| (u.clone(), k.clone()))
            .collect();
        for (uid, (ns, name)) in gone {
            self.deps.metrics.forget_pod(&ns, &name);
            state.written.remove(&uid);
            state.backoff.forget(&pod_key(&uid));
        }
        state.resolved.retain(|(uid, _), _| now.contains_key(uid));
        state.seen_pods = now;
    }

    /// Logs `message` at warn level the first time `key` is seen.
    pub(crate) fn warn_once(&self, key: String, message: impl FnOnce() -> String) {
        if self.state().logged.insert(key) {
            tracing::warn!("{}", message());
        }
    }

    /// Turns a refused write of this node's own object into the fatal identity error.
    pub(crate) fn identity_error(&self, what: &str, failure: &ApiFailure) -> Error {
        Error::NodeIdentity {
            node: self.deps.node_name.clone(),
            detail: format!("{what} was forbidden: {failure}"),
        }
    }
}

/// Backoff key of a pod's status.
pub(crate) fn pod_key(uid: &str) -> String {
    format!("pods/{uid}")
}
