//! The probe cycles' shared core: the mode, turning one report into a queued desired state,
//! and the loop that runs one cycle per interval while this replica leads.

use crate::claim_target::{ClaimTarget, Health, HealthPatcher, claim_ref};
use crate::claims::{BoundClaim, ClaimKey, ClaimStore, StoredClaim};
use crate::metrics::Metrics;
use crate::source::{HealthSource, ProbeError};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use volhealth_csi::capabilities::ControllerHealthMode;
use volhealth_model::{
    ListRecovery, Report, VolumeHealthCondition, claim_conditions, condition_keys,
};
use volhealth_writer::intervals::DriverIntervals;
use volhealth_writer::pacing::Ticker;
use volhealth_writer::{
    Clock, EventRecorder, FailureLog, Offers, ReportNotes, StatusWriter, Stored,
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
    /// No health RPC: each bound claim's storage-system annotation
    /// (`volumehealth.storage.kubernetes.io/health`, as vSphere writes it), with
    /// `--health-annotation`.
    Annotation,
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

    /// The `mode` label of the cycle metrics; `None` when nothing is probed.
    pub fn label(self) -> Option<&'static str> {
        match self {
            Mode::List { .. } => Some("list"),
            Mode::Get => Some("get"),
            Mode::Annotation => Some("annotation"),
            Mode::Off => None,
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
    /// Whether the driver is asked through the legacy VOLUME_CONDITION bridge (ListVolumes and
    /// ControllerGetVolume) instead of the v1.13 health RPCs.
    pub legacy: bool,
}

/// Why asking the driver what it can do failed (the monitor retries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    /// GetPluginInfo or ControllerGetCapabilities failed.
    #[error("probing the driver's capabilities: {0}")]
    Capabilities(String),
    /// The legacy capability calls failed.
    #[error("probing the driver's legacy capabilities: {0}")]
    LegacyCapabilities(String),
}

/// Asks the driver what it can do (again after it reconnects).
#[async_trait]
pub trait CapabilitySource: Send + Sync {
    /// Probes the driver's identity and controller capabilities.
    async fn probe(&self) -> Result<DriverInfo, CapabilityError>;
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

/// State shared by the cycles, the writer, the Event recorder and the HTTP endpoint.
pub struct Shared {
    /// The offer path of claims: reports in, PATCHes out.
    pub offers: Offers<ClaimTarget>,
    /// Events waiting to be sent.
    pub events: Arc<EventRecorder>,
    /// Unknown values and fixes already reported.
    pub notes: ReportNotes,
    /// Metrics.
    pub metrics: Arc<Metrics>,
}

impl Shared {
    /// Wires the shared state of a monitor probing every `interval`.
    pub fn new(
        claims: Arc<dyn ClaimStore>,
        patcher: Arc<dyn HealthPatcher>,
        clock: Arc<dyn Clock>,
        interval: Duration,
    ) -> Self {
        let metrics = Arc::new(Metrics::default());
        let events = Arc::new(EventRecorder::new(metrics.writer.clone()));
        let target = ClaimTarget {
            claims,
            patcher,
            clock,
            metrics: metrics.clone(),
        };
        Shared {
            offers: Offers::new(StatusWriter::new(
                target,
                interval,
                metrics.writer.clone(),
                events.clone(),
            )),
            notes: ReportNotes::new(metrics.writer.clone(), events.clone()),
            events,
            metrics,
        }
    }

    /// The write path of claims.
    pub fn writer(&self) -> &Arc<StatusWriter<ClaimTarget>> {
        self.offers.writer()
    }

    /// The claim cache.
    pub fn claims(&self) -> &Arc<dyn ClaimStore> {
        &self.offers.target().claims
    }

    /// The claim's health as stored now (our own last write while the cache lags behind it).
    pub fn effective(&self, key: &ClaimKey, stored: &StoredClaim) -> Health {
        self.offers.writer().effective(key, &as_stored(stored))
    }
}

fn as_stored(c: &StoredClaim) -> Stored<Health> {
    Stored {
        uid: Some(c.uid.clone()).filter(|u| !u.is_empty()),
        resource_version: c.resource_version.clone(),
        value: c.health.clone(),
    }
}

/// Whether a health value holds any condition.
pub(crate) fn has_conditions(h: &Health) -> bool {
    h.as_ref()
        .and_then(|h| h.health_conditions.as_ref())
        .is_some_and(|cs| !cs.is_empty())
}

/// Runs the probe cycles.
pub struct Engine {
    pub(crate) source: Arc<dyn HealthSource>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) settings: EngineSettings,
    mode: Mode,
    pub(crate) recovery: ListRecovery,
    pub(crate) connection_lost: bool,
    pub(crate) last_complete_listed: usize,
    pub(crate) failures: FailureLog,
    last_unmapped_log: Option<Instant>,
    /// Where the driver's interval may be overridden (its CSIDriver's annotation).
    intervals: Option<Arc<DriverIntervals>>,
    /// The claims with health that were bound to the driver's volumes when the last cycle
    /// started: a claim that drops out because its PV was deleted (or is being deleted) loses
    /// the health that PV gave it.
    previously_bound: BTreeMap<String, BoundClaim>,
    /// Where each re-probe's result goes when it changes how the driver is asked (its coverage
    /// is published on the CSIDriver).
    probed: Option<watch::Sender<DriverInfo>>,
}

/// Resolves when an interval changes; never when there is nothing to follow.
async fn changed<T>(rx: &mut Option<watch::Receiver<T>>) {
    if let Some(r) = rx
        && r.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// How often the "volumes without PV" debug line may appear.
const UNMAPPED_LOG_EVERY: Duration = Duration::from_secs(600);

impl Engine {
    /// An engine in `mode` with no history.
    pub fn new(
        source: Arc<dyn HealthSource>,
        shared: Arc<Shared>,
        settings: EngineSettings,
        mode: Mode,
    ) -> Self {
        Engine {
            source,
            shared,
            settings,
            mode,
            recovery: ListRecovery::new(),
            connection_lost: false,
            last_complete_listed: 0,
            failures: FailureLog::new(),
            last_unmapped_log: None,
            intervals: None,
            previously_bound: BTreeMap::new(),
            probed: None,
        }
    }

    /// Sends each re-probe's result to `probed` when its mode or bridge differs from the last.
    pub fn with_probed(mut self, probed: watch::Sender<DriverInfo>) -> Self {
        self.probed = Some(probed);
        self
    }

    /// Takes the interval from `intervals` (the driver's CSIDriver annotation, else the flag),
    /// following its changes while running.
    pub fn with_intervals(mut self, intervals: Arc<DriverIntervals>) -> Self {
        self.intervals = Some(intervals);
        self
    }

    /// Brings the interval up to date with the driver's annotation.
    fn retime(&mut self, ticker: &mut Ticker) {
        let Some(i) = &self.intervals else { return };
        let now = i.of(&self.settings.driver_name);
        if now != self.settings.interval {
            self.settings.interval = now;
            ticker.set_interval(now);
        }
    }

    /// Switches mode (after a re-probe).
    pub fn set_mode(&mut self, mode: Mode) {
        if mode != self.mode {
            tracing::info!(from = ?self.mode, to = ?mode, "driver capabilities changed");
            self.mode = mode;
        }
    }

    /// One cycle in the current mode, started at `start`, over the claims bound when it started
    /// (joined once: at 5,000 claims the join is milliseconds of the one thread's time, during
    /// which no call goes out). Claims bound later wait for the next cycle.
    pub async fn cycle(&mut self, start: Instant) {
        let bound = self
            .shared
            .claims()
            .bound_claims(&self.settings.driver_name);
        match self.mode {
            Mode::List { get } => {
                self.list_cycle(&bound, get, start).await;
            }
            Mode::Get => self.get_cycle(&bound, start).await,
            Mode::Annotation => {
                self.annotation_cycle(&bound);
                // As with Off: a driver upgrade to the health RPCs is noticed at the next cycle.
                self.connection_lost = true;
            }
            // Nothing to call, so nothing would notice a driver upgrade: ask again next time.
            Mode::Off => self.connection_lost = true,
        }
        let unbound = self.clear_released(&bound);
        let with_health = self.refresh_status_metrics(&bound);
        // Only a claim with health (stored, or on its way) can need clearing later: in a
        // healthy cluster nothing is kept.
        let shared = &self.shared;
        self.previously_bound = bound
            .into_iter()
            .filter(|(volume_id, c)| {
                with_health.contains(volume_id) || shared.offers.is_pending(&c.key)
            })
            .chain(unbound)
            .collect();
    }

    /// Clears the health of claims whose PV was deleted (or is being deleted) since the last
    /// cycle, unless the claim was recreated or bound to another volume meanwhile: nothing else
    /// would ever clear it, and a claim must not show a failing volume it no longer has. The
    /// upstream sidecar does the same on a PV's deletion.
    ///
    /// Returns the claims that left `bound` but still name their PV, which is not yet seen
    /// deleted (a claim's phase can change before its PV's deletion reaches the cache): they are
    /// looked at again next cycle rather than forgotten with their health on them.
    fn clear_released(
        &mut self,
        bound: &BTreeMap<String, BoundClaim>,
    ) -> Vec<(String, BoundClaim)> {
        let claims = self.shared.claims().clone();
        let mut released = Vec::new();
        let mut unbound = Vec::new();
        let gone = std::mem::take(&mut self.previously_bound)
            .into_iter()
            .filter(|(volume_id, _)| !bound.contains_key(volume_id));
        for (volume_id, old) in gone {
            if claims.released(&old.pv_name, &old.key, &old.stored.uid) {
                if let Some(stored) = claims.claim(&old.key) {
                    released.push(BoundClaim { stored, ..old });
                }
            } else if claims.still_names(&old.pv_name, &old.key, &old.stored.uid) {
                unbound.push((volume_id, old));
            }
        }
        for claim in released {
            if has_conditions(&self.shared.effective(&claim.key, &claim.stored)) {
                tracing::info!(claim = %claim.key, pv = %claim.pv_name, "the claim's volume was deleted; clearing the health it reported");
                self.apply(&claim, Report::healthy());
            }
        }
        unbound
    }

    /// Runs cycles every interval while `leader` is true, re-probing capabilities after connection loss.
    pub async fn run(
        mut self,
        caps: &dyn CapabilitySource,
        mut leader: watch::Receiver<bool>,
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut ticker = Ticker::new(self.settings.interval);
        let mut leader_open = true;
        let mut interval_changes = self.intervals.as_ref().map(|i| i.subscribe());
        loop {
            self.retime(&mut ticker);
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
                    ticker.reset();
                }
                continue;
            }
            tokio::select! {
                _ = &mut shutdown => return,
                r = leader.changed(), if leader_open => { leader_open = r.is_ok(); continue; }
                () = changed(&mut interval_changes) => continue,
                _ = tokio::time::sleep_until(ticker.next_due()) => {}
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
                        if let Some(tx) = &self.probed {
                            tx.send_if_modified(|held| {
                                let changed = (held.mode, held.legacy) != (info.mode, info.legacy);
                                if changed {
                                    *held = info.clone();
                                }
                                changed
                            });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "driver still unreachable"),
                }
            }
            let start = Instant::now();
            let mode = self.mode;
            // A Get cycle spans the whole interval: shutdown must not wait for it.
            tokio::select! {
                _ = &mut shutdown => return,
                _ = async {
                    let _busy = volhealth_daemon::shutdown_signal::in_progress(
                        "a health probe cycle (CSI calls to the driver, writes to the API server)",
                    );
                    self.cycle(start).await
                } => {}
            }
            let took = start.elapsed();
            let overran = ticker.cycle_done(start, "a probe cycle");
            if let Some(label) = mode.label() {
                self.shared
                    .metrics
                    .writer
                    .cycle(&self.settings.driver_name, label, took, overran);
            }
        }
    }

    /// Notes a failed RPC (a failed RPC is never a recovery).
    pub(crate) fn note_error(&mut self, e: &ProbeError) {
        if e.calls_for_reprobe() {
            self.connection_lost = true;
        }
    }

    /// Hands one authoritative report for a bound volume to the offer path, after noting what
    /// in it was unknown or had to be fixed.
    pub(crate) fn apply(&mut self, claim: &BoundClaim, report: Report<VolumeHealthCondition>) {
        let shared = &self.shared;
        if !shared.notes.is_quiet(&report) {
            shared.notes.note(
                &format!("pvc {}", claim.key),
                &claim_ref(&claim.key, Some(&claim.stored.uid)),
                &format!("volume {}", claim.volume_id),
                &report,
            );
        }
        shared.offers.offer(claim.key.clone(), report);
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

    /// Makes the per-claim status series of the claims `bound` when the cycle started follow
    /// what is stored, and forgets the others; returns the volumes whose claims have health
    /// stored. Runs every cycle over every bound claim, reading what is stored once per claim,
    /// so it borrows from the cycle's one map of bound claims and copies nothing per claim but
    /// the volume ids of claims with health.
    fn refresh_status_metrics(&mut self, bound: &BTreeMap<String, BoundClaim>) -> HashSet<String> {
        let shared = &self.shared;
        let mut alive: HashSet<(&str, &str)> = HashSet::with_capacity(bound.len());
        let mut with_health = HashSet::new();
        for (volume_id, claim) in bound {
            let health = shared.effective(&claim.key, &claim.stored);
            let keys = condition_keys(claim_conditions(health.as_ref()));
            if !keys.is_empty() {
                with_health.insert(volume_id.clone());
            }
            shared.metrics.set_claim_conditions(&claim.key, keys);
            alive.insert((&claim.key.namespace, &claim.key.name));
        }
        let is_alive = |k: &ClaimKey| alive.contains(&(k.namespace.as_str(), k.name.as_str()));
        shared.metrics.retain_claims(is_alive);
        let claims = shared.claims().clone();
        shared
            .writer()
            .retain(|k| is_alive(k) || claims.claim(k).is_some());
        // Notes about claims are keyed "pvc NAMESPACE/NAME".
        shared.notes.retain(|k| {
            k.strip_prefix("pvc ")
                .and_then(|c| c.split_once('/'))
                .is_some_and(|c| alive.contains(&c))
        });
        self.failures.retain(|t| {
            t.split_once(' ')
                .is_none_or(|(_, volume)| bound.contains_key(volume))
        });
        with_health
    }
}
