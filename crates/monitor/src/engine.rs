//! The probe cycles' shared core: the mode, turning one report into a desired status, unknown
//! values, and the loop that runs one cycle per interval while this replica leads.

use crate::claims::{BoundClaim, ClaimStore};
use crate::clock::Clock;
use crate::events::{condition_keys, unknown_event};
use crate::metrics::Metrics;
use crate::source::{HealthSource, ProbeError};
use crate::write_loop::lock;
use crate::write_queue::{PendingWrite, WriteQueue};
use crate::write_state::WriteState;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use volhealth_csi::capabilities::ControllerHealthMode;
use volhealth_model::{
    ListRecovery, Report, UnknownCondition, VolumeHealthCondition, Write, reconcile_pvc,
};

/// How the driver is probed, from its controller capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// ControllerListVolumeHealth; `get` = Get is there to confirm recoveries.
    List {
        /// Whether ControllerGetVolumeHealth is advertised too (the spec requires it).
        get: bool,
    },
    /// ControllerGetVolumeHealth per bound volume.
    Get,
    /// No controller health capability: nothing to probe.
    Off,
}

impl Mode {
    /// The mode for the advertised controller capabilities.
    pub fn from_capabilities(c: &ControllerHealthMode) -> Mode {
        match c {
            ControllerHealthMode::List { get } => Mode::List { get: *get },
            ControllerHealthMode::Get => Mode::Get,
            ControllerHealthMode::None => Mode::Off,
        }
    }
}

/// What a capability probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverInfo {
    /// The driver's name (GetPluginInfo).
    pub driver_name: String,
    /// How to probe it.
    pub mode: Mode,
    /// Spec violations found while probing (e.g. LIST without GET).
    pub violations: Vec<String>,
}

/// Asks the driver what it can do (again after it reconnects).
pub trait CapabilitySource: Send + Sync + 'static {
    /// Probes the driver's identity and controller capabilities.
    fn probe(&self) -> impl Future<Output = Result<DriverInfo, String>> + Send;
}

/// Fixed settings of the cycles.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// The driver's name (PV filter and metric label).
    pub driver_name: String,
    /// One cycle per interval.
    pub interval: Duration,
    /// Deadline of each RPC / list page.
    pub timeout: Duration,
    /// `max_entries` per list page.
    pub page_size: i32,
    /// Most Get calls in flight.
    pub workers: usize,
}

/// State shared by the cycles, the writer and the HTTP endpoint.
#[derive(Debug, Default)]
pub struct Shared {
    /// Desired states waiting to be written.
    pub queue: WriteQueue,
    /// Recent writes and held-back claims.
    pub state: Mutex<WriteState>,
    /// Metrics.
    pub metrics: Metrics,
}

/// Runs the probe cycles.
pub struct Engine<S: HealthSource, C: ClaimStore, K: Clock> {
    pub(crate) source: Arc<S>,
    pub(crate) claims: Arc<C>,
    clock: Arc<K>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) settings: EngineSettings,
    mode: Mode,
    pub(crate) recovery: ListRecovery,
    unknown_seen: HashMap<String, BTreeSet<(i32, String)>>,
    pub(crate) connection_lost: bool,
    last_unmapped_log: Option<Instant>,
}

/// How often the "volumes without PV" debug line may appear.
const UNMAPPED_LOG_EVERY: Duration = Duration::from_secs(600);

/// Calls `fut` with the per-call deadline, recording the probe metrics.
pub(crate) async fn timed<T>(
    metrics: &Metrics,
    driver: &str,
    method: &str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, ProbeError>>,
) -> Result<T, ProbeError> {
    let start = Instant::now();
    let result = match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(ProbeError {
            code: tonic::Code::DeadlineExceeded,
            message: format!(
                "no answer within {}",
                volhealth_daemon::duration::format(timeout)
            ),
        }),
    };
    metrics.probe(driver, method, result.is_ok(), start.elapsed());
    result
}

impl<S: HealthSource, C: ClaimStore, K: Clock> Engine<S, C, K> {
    /// An engine in `mode` with no history.
    pub fn new(
        source: Arc<S>,
        claims: Arc<C>,
        clock: Arc<K>,
        shared: Arc<Shared>,
        settings: EngineSettings,
        mode: Mode,
    ) -> Self {
        Engine {
            source,
            claims,
            clock,
            shared,
            settings,
            mode,
            recovery: ListRecovery::new(),
            unknown_seen: HashMap::new(),
            connection_lost: false,
            last_unmapped_log: None,
        }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Switches mode (after a re-probe).
    pub fn set_mode(&mut self, mode: Mode) {
        if mode != self.mode {
            tracing::info!(from = ?self.mode, to = ?mode, "driver capabilities changed");
            self.mode = mode;
        }
    }

    /// One cycle in the current mode, started at `start`.
    pub async fn cycle(&mut self, start: Instant) {
        match self.mode {
            Mode::List { get } => {
                self.list_cycle(get).await;
            }
            Mode::Get => self.get_cycle(start).await,
            // Nothing to call, so nothing would notice a driver upgrade: ask again next time.
            Mode::Off => self.connection_lost = true,
        }
        self.refresh_status_metrics();
    }

    /// Runs cycles every interval while `leader` is true, re-probing capabilities after connection loss.
    pub async fn run(
        mut self,
        caps: &impl CapabilitySource,
        mut leader: watch::Receiver<bool>,
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut next = Instant::now();
        let mut leader_open = true;
        loop {
            if !*leader.borrow_and_update() {
                if !leader_open {
                    // No leader election task any more: nothing can make us leader.
                    shutdown.as_mut().await;
                    return;
                }
                tokio::select! {
                    _ = &mut shutdown => return,
                    r = leader.changed() => leader_open = r.is_ok(),
                }
                if *leader.borrow() {
                    // A new term starts from what is stored, not from an old term's counts.
                    tracing::info!("became leader; starting health probes");
                    self.recovery = ListRecovery::new();
                    self.unknown_seen.clear();
                    next = Instant::now();
                }
                continue;
            }
            tokio::select! {
                _ = &mut shutdown => return,
                r = leader.changed(), if leader_open => { leader_open = r.is_ok(); continue; }
                _ = tokio::time::sleep_until(next) => {}
            }
            if self.connection_lost {
                match caps.probe().await {
                    Ok(info) => {
                        self.connection_lost = false;
                        if info.driver_name != self.settings.driver_name {
                            tracing::warn!(was = %self.settings.driver_name, now = %info.driver_name, "driver name changed; keeping the name this monitor started with");
                        }
                        for v in &info.violations {
                            tracing::warn!(violation = %v, "driver breaks the CSI spec");
                        }
                        self.set_mode(info.mode);
                    }
                    Err(e) => tracing::warn!(error = %e, "driver still unreachable"),
                }
            }
            let start = Instant::now();
            // A Get cycle spans the whole interval: shutdown must not wait for it.
            tokio::select! {
                _ = &mut shutdown => return,
                _ = self.cycle(start) => {}
            }
            next = start + self.settings.interval;
            if next <= Instant::now() {
                tracing::warn!(interval = ?self.settings.interval, "a probe cycle took longer than the interval");
                next = Instant::now();
            }
        }
    }

    /// Notes a failed RPC (a failed RPC is never a recovery).
    pub(crate) fn note_error(&mut self, e: &ProbeError) {
        if e.calls_for_reprobe() {
            self.connection_lost = true;
        }
    }

    /// Turns one authoritative report for a bound volume into a desired status.
    pub(crate) fn apply(&mut self, claim: &BoundClaim, report: &Report<VolumeHealthCondition>) {
        self.note_unknown(claim, report);
        for fix in &report.fixes {
            tracing::debug!(volume = %claim.volume_id, fix = %fix, "sanitised the driver's report");
        }
        let (stored, held) = {
            let mut s = lock(&self.shared.state);
            (
                s.effective(&claim.key, &claim.stored),
                s.is_held(&claim.key),
            )
        };
        let desired = match reconcile_pvc(stored.as_ref(), report, self.clock.now()) {
            Some(Write::Set(h)) => Some(h),
            Some(Write::Remove) => None,
            None => {
                // Nothing to change; a stale pending write must not land after this.
                if self
                    .shared
                    .queue
                    .pending(&claim.key)
                    .is_some_and(|p| p.desired != stored)
                {
                    self.shared.queue.push(PendingWrite {
                        key: claim.key.clone(),
                        volume_id: claim.volume_id.clone(),
                        desired: stored,
                    });
                }
                return;
            }
        };
        if held {
            return;
        }
        self.shared.queue.push(PendingWrite {
            key: claim.key.clone(),
            volume_id: claim.volume_id.clone(),
            desired,
        });
    }

    fn note_unknown(&mut self, claim: &BoundClaim, report: &Report<VolumeHealthCondition>) {
        let now: BTreeSet<(i32, String)> = report
            .unknown
            .iter()
            .map(|u| (u.raw_status, u.reason.clone()))
            .collect();
        let before = self.unknown_seen.get(&claim.volume_id);
        let new: Vec<&UnknownCondition> = report
            .unknown
            .iter()
            .filter(|u| !before.is_some_and(|b| b.contains(&(u.raw_status, u.reason.clone()))))
            .collect();
        if !new.is_empty() {
            for u in &new {
                self.shared.metrics.unknown_condition(u.raw_status);
            }
            tracing::warn!(claim = %claim.key, volume = %claim.volume_id, values = ?new.iter().map(|u| u.raw_status).collect::<Vec<_>>(), "driver reported health status values this monitor does not know");
            self.shared.queue.push_event(unknown_event(
                &claim.key,
                &claim.stored.uid,
                &claim.volume_id,
                &new,
            ));
        }
        if now.is_empty() {
            self.unknown_seen.remove(&claim.volume_id);
        } else {
            self.unknown_seen.insert(claim.volume_id.clone(), now);
        }
    }

    /// Logs (debug, rate-limited) volumes the driver reported that have no bound PV.
    pub(crate) fn note_unmapped(&mut self, ids: &[String]) {
        self.shared.metrics.set_unmapped(ids.len());
        if ids.is_empty() {
            return;
        }
        if self
            .last_unmapped_log
            .is_some_and(|t| t.elapsed() < UNMAPPED_LOG_EVERY)
        {
            return;
        }
        self.last_unmapped_log = Some(Instant::now());
        let sample: Vec<&String> = ids.iter().take(5).collect();
        tracing::debug!(count = ids.len(), sample = ?sample, "the driver reported volumes that have no bound PV; ignoring them");
    }

    /// Makes the per-claim status series follow what is stored, and forgets deleted claims.
    fn refresh_status_metrics(&mut self) {
        let bound = self.claims.bound_claims(&self.settings.driver_name);
        let metrics = &self.shared.metrics;
        let mut s = lock(&self.shared.state);
        let mut alive = BTreeSet::new();
        for claim in bound.values() {
            let health = s.effective(&claim.key, &claim.stored);
            metrics.set_claim_conditions(&claim.key, condition_keys(health.as_ref()));
            alive.insert(claim.key.clone());
        }
        for key in metrics.exported_claims() {
            if !alive.contains(&key) {
                metrics.set_claim_conditions(&key, BTreeSet::new());
            }
        }
        s.retain(|k| alive.contains(k) || self.claims.claim(k).is_some());
    }
}
