//! The probe loop: every interval, probe the node's volumes and storage backends and write what changed.

use crate::cluster::{ApiFailure, Cluster, PodSource};
use crate::drivers::DriverSet;
use crate::error::{Error, Result};
use crate::kubelet_dirs::KubeletDirs;
use crate::metrics::Metrics;
use crate::pod_volumes::CsiVolume;
use crate::targets::{ClusterEvents, PodKey, PodTarget, StorageTarget};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Semaphore;
use volhealth_writer::backoff::RefusalBackoff;
use volhealth_writer::events::{EVENT_BURST, EVENT_QPS};
use volhealth_writer::{Clock, EventRecorder, FailureLog, RateLimiter, ReportNotes, StatusWriter};

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
    /// pod UID → (namespace, name) of pods seen last cycle.
    pub seen_pods: HashMap<String, (String, String)>,
    /// Holds of refused `csinodes` (spec.drivers) writes, by the shared policy.
    pub spec_backoff: RefusalBackoff<&'static str>,
    /// Things logged once (resolution failures).
    pub logged: HashSet<String>,
}

/// The node agent's probe loop.
pub struct Agent {
    pub(crate) deps: AgentDeps,
    pub(crate) state: Mutex<State>,
    pub(crate) probes: Semaphore,
    /// The write path of `pods/status`.
    pub(crate) pod_writer: StatusWriter<PodTarget>,
    /// The write path of `csinodes/status`.
    pub(crate) storage_writer: StatusWriter<StorageTarget>,
    /// Events waiting to be sent.
    pub events: Arc<EventRecorder>,
    /// Unknown values and fixes already reported.
    pub(crate) notes: ReportNotes,
    /// Which health calls are failing now.
    pub(crate) failures: FailureLog,
}

impl Agent {
    /// A loop over `deps`.
    pub fn new(deps: AgentDeps) -> Agent {
        let permits = deps.max_concurrent_probes.max(1);
        let writer_metrics = deps.metrics.writer.clone();
        let events = Arc::new(EventRecorder::new(writer_metrics.clone()));
        let pod_writer = StatusWriter::new(
            PodTarget {
                cluster: deps.cluster.clone(),
                metrics: deps.metrics.clone(),
            },
            deps.interval,
            writer_metrics.clone(),
            events.clone(),
        );
        let storage_writer = StatusWriter::new(
            StorageTarget {
                cluster: deps.cluster.clone(),
                metrics: deps.metrics.clone(),
            },
            deps.interval,
            writer_metrics.clone(),
            events.clone(),
        );
        Agent {
            state: Mutex::new(State {
                resolved: HashMap::new(),
                seen_pods: HashMap::new(),
                spec_backoff: RefusalBackoff::new(deps.interval),
                logged: HashSet::new(),
            }),
            probes: Semaphore::new(permits),
            pod_writer,
            storage_writer,
            notes: ReportNotes::new(writer_metrics, events.clone()),
            events,
            failures: FailureLog::new(),
            deps,
        }
    }

    /// Sends this agent's Events through its cluster until `shutdown`, on their own budget.
    pub async fn send_events(&self, shutdown: impl std::future::Future<Output = ()>) {
        self.events
            .clone()
            .run(
                ClusterEvents(self.deps.cluster.clone()),
                RateLimiter::new(EVENT_QPS, EVENT_BURST),
                shutdown,
            )
            .await;
    }

    /// Whether the last status write could not reach the API server (for `/readyz`).
    pub fn api_unreachable(&self) -> bool {
        self.pod_writer.api_unreachable() || self.storage_writer.api_unreachable()
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
        for (_, (ns, name)) in gone {
            self.deps.metrics.forget_pod(&ns, &name);
        }
        state.resolved.retain(|(uid, _), _| now.contains_key(uid));
        drop(state);
        self.pod_writer
            .retain(|k: &PodKey| now.contains_key(&k.uid));
        let prefixes: HashSet<String> = now
            .values()
            .map(|(ns, name)| format!("pod {ns}/{name} "))
            .collect();
        self.notes.retain(|k| {
            !k.starts_with("pod ")
                || k.match_indices(' ')
                    .nth(1)
                    .is_some_and(|(i, _)| prefixes.contains(&k[..=i]))
        });
        self.state().seen_pods = now;
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
