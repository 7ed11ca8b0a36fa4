//! The probe loop: every interval, probe the node's volumes and storage backends and write what changed.

use crate::cluster::{ApiFailure, Cluster, PodSource};
use crate::drivers::{Driver, DriverSet};
use crate::error::{Error, Result};
use crate::forbidden::Forbidden;
use crate::kubelet_dirs::KubeletDirs;
use crate::metrics::Metrics;
use crate::pod_volumes::CsiVolume;
use crate::targets::{ClusterEvents, PodKey, PodTarget, StorageTarget};
use crate::watched::WatchedPod;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Semaphore;
use volhealth_writer::backoff::RefusalBackoff;
use volhealth_writer::events::{EVENT_BURST, EVENT_QPS};
use volhealth_writer::intervals::DriverIntervals;
use volhealth_writer::pacing::{cycle_anchor, overran};
use volhealth_writer::{
    Clock, EventRecorder, FailureLog, Offers, RateLimiter, ReportNotes, StatusWriter, WriteLoop,
};

/// The `mode` label of the agent's `csi_volume_health_cycle_duration_seconds` and
/// `csi_volume_health_cycle_overruns_total` series (the monitor's are `list` and `get`).
pub const CYCLE_MODE: &str = "node";

/// Status writes per second the agent allows itself, sustained (the kubelet's default client
/// limit); the no-ops the write loop finds cost nothing.
pub const STATUS_WRITE_QPS: f64 = 50.0;
/// Status writes the agent sends at once before [`STATUS_WRITE_QPS`] paces them (the kubelet's
/// default client burst).
pub const STATUS_WRITE_BURST: u32 = 100;

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
    /// Probe interval of each driver (the flag's, or its CSIDriver's annotation).
    pub intervals: Arc<DriverIntervals>,
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
    /// Driver name → when its last probes were due: when they started, less a timer's lateness
    /// (see [`cycle_anchor`]), so cycles keep their cadence.
    pub last_probed: HashMap<String, tokio::time::Instant>,
}

/// The node agent's probe loop.
pub struct Agent {
    pub(crate) deps: AgentDeps,
    pub(crate) state: Mutex<State>,
    pub(crate) probes: Semaphore,
    /// The offer path of `pods/status`: the cycles' reports in, PATCHes out.
    pub(crate) pod_offers: Offers<PodTarget>,
    /// The offer path of `csinodes/status`.
    pub(crate) storage_offers: Offers<StorageTarget>,
    /// A write refused because the credentials are for another node.
    pub(crate) forbidden: Arc<Forbidden>,
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
        let interval = deps.intervals.default_interval();
        let events = Arc::new(EventRecorder::new(writer_metrics.clone()));
        let forbidden = Arc::new(Forbidden::default());
        let pod_writer = StatusWriter::new(
            PodTarget {
                cluster: deps.cluster.clone(),
                pods: deps.pods.clone(),
                clock: deps.clock.clone(),
                metrics: deps.metrics.clone(),
                forbidden: forbidden.clone(),
            },
            interval,
            writer_metrics.clone(),
            events.clone(),
        );
        let storage_writer = StatusWriter::new(
            StorageTarget {
                cluster: deps.cluster.clone(),
                clock: deps.clock.clone(),
                cached: Mutex::new(None),
                metrics: deps.metrics.clone(),
                forbidden: forbidden.clone(),
            },
            interval,
            writer_metrics.clone(),
            events.clone(),
        );
        Agent {
            state: Mutex::new(State {
                resolved: HashMap::new(),
                seen_pods: HashMap::new(),
                spec_backoff: RefusalBackoff::new(interval),
                logged: HashSet::new(),
                last_probed: HashMap::new(),
            }),
            probes: Semaphore::new(permits),
            pod_offers: Offers::new(pod_writer),
            storage_offers: Offers::new(storage_writer),
            forbidden,
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
        self.pod_offers.writer().api_unreachable() || self.storage_offers.writer().api_unreachable()
    }

    /// Whether the API server drops the health fields from the agent's writes (its
    /// `CSIVolumeHealth` feature gate is off), for `/readyz`.
    pub fn drops_field(&self) -> bool {
        self.pod_offers.writer().drops_field() || self.storage_offers.writer().drops_field()
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps inconsistent in a harmful way: they are caches.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs cycles, and the write loops that store what they find, until an error that must stop
    /// the agent (the credentials do not belong to this node). Dropping the future stops both.
    pub async fn run(&self) -> Result<()> {
        let (pods, storage) = self.write_loops();
        let writes = async {
            futures::join!(
                pods.run(std::future::pending()),
                storage.run(std::future::pending())
            )
        };
        tokio::select! {
            r = self.run_cycles() => r,
            (what, failure) = self.forbidden.wait() => Err(self.identity_error(&what, &failure)),
            _ = writes => Ok(()),
        }
    }

    /// The loops writing pod and CSINode status from their queues: writes of different objects
    /// concurrently, the most severe first, each paced by its own rate limit.
    pub(crate) fn write_loops(&self) -> (WriteLoop<PodTarget>, WriteLoop<StorageTarget>) {
        let limiter = || RateLimiter::new(STATUS_WRITE_QPS, STATUS_WRITE_BURST);
        (
            self.pod_offers.write_loop(limiter()),
            self.storage_offers.write_loop(limiter()),
        )
    }

    /// The identity error of a write refused since the agent started, if any.
    #[cfg(test)]
    pub(crate) fn forbidden_error(&self) -> Option<Error> {
        self.forbidden
            .get()
            .map(|(what, failure)| self.identity_error(&what, &failure))
    }

    /// Runs cycles until an error that must stop the agent.
    async fn run_cycles(&self) -> Result<()> {
        let mut interval_changes = self.deps.intervals.subscribe();
        loop {
            let start = tokio::time::Instant::now();
            self.run_cycle(start).await?;
            let next = self.next_due(start);
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                // A changed interval may make a driver due sooner: look again (a cycle with no
                // driver due probes nothing).
                r = interval_changes.changed() => if r.is_err() {
                    tokio::time::sleep_until(next).await;
                },
            }
        }
    }

    /// When the next driver is due, after a cycle that started at `start`.
    fn next_due(&self, start: tokio::time::Instant) -> tokio::time::Instant {
        let drivers = self.deps.drivers.snapshot();
        let state = self.state();
        drivers
            .keys()
            .map(|d| {
                let last = state.last_probed.get(d).copied().unwrap_or(start);
                last + self.deps.intervals.of(d)
            })
            .min()
            .unwrap_or(start + self.deps.intervals.default_interval())
            .max(start)
    }

    /// One cycle started at `start`, for the drivers whose interval has passed since their last
    /// probes: storage probes at once, volume probes spread over the shortest of their intervals.
    pub async fn run_cycle(&self, start: tokio::time::Instant) -> Result<()> {
        let drivers = self.deps.drivers.snapshot();
        let due = self.take_due(&drivers, start);
        // One snapshot of the node's pods: what is forgotten and what is probed agree.
        let pods = self.deps.pods.pods();
        self.forget_gone_pods(&pods);
        if due.is_empty() {
            return Ok(());
        }
        let spread = due
            .keys()
            .map(|d| self.deps.intervals.of(d))
            .min()
            .unwrap_or_else(|| self.deps.intervals.default_interval());
        let (storage, volumes) = futures::join!(
            self.storage_cycle(&drivers, &due),
            self.volume_cycle(pods, &due, start, spread)
        );
        self.cycle_done(&due, start);
        storage?;
        volumes
    }

    /// Times the cycle that started at `start` for each driver it probed, and counts it as an
    /// overrun for a driver whose next probes were due before it ended (they then start at once).
    fn cycle_done(&self, due: &BTreeMap<String, Arc<Driver>>, start: tokio::time::Instant) {
        let end = tokio::time::Instant::now();
        let took = end - start;
        let state = self.state();
        for name in due.keys() {
            let interval = self.deps.intervals.of(name);
            let anchor = state.last_probed.get(name).copied().unwrap_or(start);
            let overran = overran(anchor, interval, end);
            if overran {
                tracing::warn!(driver = %name, interval = %volhealth_daemon::duration::format(interval), took = %volhealth_daemon::duration::format(took), "a probe cycle took longer than the driver's interval");
            }
            self.deps
                .metrics
                .writer
                .cycle(name, CYCLE_MODE, took, overran);
        }
    }

    /// The drivers due at `start`, marked as probed then.
    fn take_due(
        &self,
        drivers: &BTreeMap<String, Arc<Driver>>,
        start: tokio::time::Instant,
    ) -> BTreeMap<String, Arc<Driver>> {
        let mut state = self.state();
        state.last_probed.retain(|d, _| drivers.contains_key(d));
        let mut due = BTreeMap::new();
        for (name, driver) in drivers {
            let interval = self.deps.intervals.of(name);
            let anchor = match state.last_probed.get(name) {
                None => Some(start),
                Some(last) if start >= *last + interval => {
                    Some(cycle_anchor(*last + interval, start, interval))
                }
                Some(_) => None,
            };
            if let Some(anchor) = anchor {
                state.last_probed.insert(name.clone(), anchor);
                due.insert(name.clone(), driver.clone());
            }
        }
        due
    }

    fn forget_gone_pods(&self, pods: &[Arc<WatchedPod>]) {
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
        self.pod_offers
            .writer()
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
