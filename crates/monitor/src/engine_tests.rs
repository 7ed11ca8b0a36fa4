//! The cycle logic against fakes of the driver and the API server, on paused tokio time.

use crate::claims::{BoundClaim, ClaimKey, ClaimStore, StoredClaim};
use crate::clock::TokioClock;
use crate::engine::{CapabilitySource, DriverInfo, Engine, EngineSettings, Mode, Shared};
use crate::events::{REASON_DEGRADED, REASON_RECOVERED, REASON_UNKNOWN};
use crate::rate_limit::RateLimiter;
use crate::source::{HealthSource, ListPage, ProbeError};
use crate::status_writer::{ClaimEvent, Patched, StatusWriter, WriteError};
use crate::write_loop::WriteLoop;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use volhealth_csi::capabilities::ControllerHealthMode;
use volhealth_csi::v1::VolumeHealth;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_model::{VolumeHealthCondition, VolumeHealthStatus};

const DRIVER: &str = "fake.csi.example.com";
const INTERVAL: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_secs(15);
const DEGRADED: i32 = 1;
const INACCESSIBLE: i32 = 2;

fn entry(status: i32, reason: &str, message: &str) -> VolumeHealthEntry {
    VolumeHealthEntry {
        status,
        reason: reason.into(),
        message: message.into(),
    }
}

// ---------------------------------------------------------------- fake driver

#[derive(Default)]
struct DriverState {
    health: BTreeMap<String, Vec<VolumeHealthEntry>>,
    fail_list_page: Option<usize>,
    hang_list_page: Option<usize>,
    list_delay: Duration,
    omit: BTreeSet<String>,
    stale_empty_duplicates: bool,
    fail_get: Option<tonic::Code>,
    get_delay: Duration,
    list_pages: usize,
    list_max_entries: Vec<i32>,
    get_calls: Vec<(String, Duration)>,
    inflight: usize,
    max_inflight: usize,
}

struct FakeDriver {
    st: Mutex<DriverState>,
    t0: Instant,
}

impl FakeDriver {
    fn new() -> Self {
        FakeDriver {
            st: Mutex::new(DriverState::default()),
            t0: Instant::now(),
        }
    }
    fn with<T>(&self, f: impl FnOnce(&mut DriverState) -> T) -> T {
        f(&mut self.st.lock().unwrap())
    }
    fn set(&self, vol: &str, entries: Vec<VolumeHealthEntry>) {
        self.with(|s| {
            if entries.is_empty() {
                s.health.remove(vol);
            } else {
                s.health.insert(vol.into(), entries);
            }
        });
    }
    fn gets(&self) -> Vec<String> {
        self.with(|s| s.get_calls.iter().map(|(v, _)| v.clone()).collect())
    }
}

impl HealthSource for FakeDriver {
    async fn list_page(
        &self,
        max_entries: i32,
        starting_token: String,
    ) -> Result<ListPage, ProbeError> {
        let (result, hang, delay) = self.with(|s| {
            s.list_max_entries.push(max_entries);
            let index = s.list_pages;
            s.list_pages += 1;
            let all: Vec<VolumeHealth> = s
                .health
                .iter()
                .filter(|(v, _)| !s.omit.contains(*v))
                .map(|(v, e)| VolumeHealth {
                    volume_id: v.clone(),
                    health_statuses: e.clone(),
                })
                .collect();
            let off: usize = starting_token.parse().unwrap_or(0);
            let end = (off + max_entries as usize).min(all.len());
            let mut entries = all.get(off..end).map(<[_]>::to_vec).unwrap_or_default();
            if s.stale_empty_duplicates {
                // Paging shifted: the previous page's volumes come back, with nothing in them.
                for v in all
                    .get(off.saturating_sub(max_entries as usize)..off)
                    .unwrap_or_default()
                {
                    entries.push(VolumeHealth {
                        volume_id: v.volume_id.clone(),
                        health_statuses: vec![],
                    });
                }
            }
            let next_token = if end < all.len() {
                end.to_string()
            } else {
                String::new()
            };
            let result = if s.fail_list_page == Some(index) {
                Err(ProbeError {
                    code: tonic::Code::Unavailable,
                    message: "injected".into(),
                })
            } else {
                Ok(ListPage {
                    entries,
                    next_token,
                })
            };
            (result, s.hang_list_page == Some(index), s.list_delay)
        });
        if hang {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(delay).await;
        result
    }

    async fn get(&self, volume_id: String) -> Result<Vec<VolumeHealthEntry>, ProbeError> {
        let delay = self.with(|s| {
            s.get_calls.push((volume_id.clone(), self.t0.elapsed()));
            s.inflight += 1;
            s.max_inflight = s.max_inflight.max(s.inflight);
            s.get_delay
        });
        tokio::time::sleep(delay).await;
        self.with(|s| {
            s.inflight -= 1;
            match s.fail_get {
                Some(code) => Err(ProbeError {
                    code,
                    message: "injected".into(),
                }),
                None => Ok(s.health.get(&volume_id).cloned().unwrap_or_default()),
            }
        })
    }
}

// ---------------------------------------------------------------- fake API server

#[derive(Default)]
struct ApiState {
    claims: BTreeMap<String, BoundClaim>,
    rv: u64,
    patches: Vec<(ClaimKey, Option<VolumeHealthStatus>)>,
    events: Vec<ClaimEvent>,
    drop_health: bool,
    unavailable: bool,
    cache_lag: bool,
}

#[derive(Default)]
struct FakeApi {
    st: Mutex<ApiState>,
}

impl FakeApi {
    fn with<T>(&self, f: impl FnOnce(&mut ApiState) -> T) -> T {
        f(&mut self.st.lock().unwrap())
    }
    fn add_claim(&self, vol: &str, stored: Option<VolumeHealthStatus>) {
        self.with(|s| {
            s.rv += 1;
            let name = vol.trim_start_matches("vol-");
            s.claims.insert(
                vol.into(),
                BoundClaim {
                    volume_id: vol.into(),
                    pv_name: format!("pv-{name}"),
                    key: ClaimKey {
                        namespace: "ns".into(),
                        name: format!("pvc-{name}"),
                    },
                    stored: StoredClaim {
                        uid: format!("uid-{name}"),
                        resource_version: Some(s.rv.to_string()),
                        health: stored,
                    },
                },
            );
        });
    }
    fn patches(&self) -> Vec<(ClaimKey, Option<VolumeHealthStatus>)> {
        self.with(|s| s.patches.clone())
    }
    fn stored(&self, vol: &str) -> Option<VolumeHealthStatus> {
        self.with(|s| s.claims.get(vol).and_then(|c| c.stored.health.clone()))
    }
    fn event_reasons(&self) -> Vec<&'static str> {
        self.with(|s| s.events.iter().map(|e| e.reason).collect())
    }
}

impl ClaimStore for FakeApi {
    fn is_synced(&self) -> bool {
        true
    }
    fn bound_claims(&self, driver: &str) -> BTreeMap<String, BoundClaim> {
        assert_eq!(driver, DRIVER);
        self.with(|s| s.claims.clone())
    }
    fn claim(&self, key: &ClaimKey) -> Option<StoredClaim> {
        self.with(|s| {
            s.claims
                .values()
                .find(|c| &c.key == key)
                .map(|c| c.stored.clone())
        })
    }
}

impl StatusWriter for FakeApi {
    async fn patch_health(
        &self,
        key: &ClaimKey,
        health: Option<&VolumeHealthStatus>,
    ) -> Result<Patched, WriteError> {
        self.with(|s| {
            if s.unavailable {
                return Err(WriteError::Unavailable("connection refused".into()));
            }
            s.patches.push((key.clone(), health.cloned()));
            s.rv += 1;
            let rv = s.rv.to_string();
            let (drop, lag) = (s.drop_health, s.cache_lag);
            let claim = s
                .claims
                .values_mut()
                .find(|c| &c.key == key)
                .ok_or(WriteError::NotFound)?;
            let stored = if drop && health.is_some() {
                claim.stored.health.clone()
            } else {
                health.cloned()
            };
            if !lag {
                claim.stored.health = stored.clone();
                claim.stored.resource_version = Some(rv.clone());
            }
            Ok(Patched {
                resource_version: Some(rv),
                health: stored,
            })
        })
    }
    async fn event(&self, event: &ClaimEvent) -> Result<(), WriteError> {
        self.with(|s| s.events.push(event.clone()));
        Ok(())
    }
}

impl StatusWriter for Arc<FakeApi> {
    async fn patch_health(
        &self,
        key: &ClaimKey,
        health: Option<&VolumeHealthStatus>,
    ) -> Result<Patched, WriteError> {
        self.as_ref().patch_health(key, health).await
    }
    async fn event(&self, event: &ClaimEvent) -> Result<(), WriteError> {
        self.as_ref().event(event).await
    }
}

// ---------------------------------------------------------------- rig

struct Rig {
    driver: Arc<FakeDriver>,
    api: Arc<FakeApi>,
    shared: Arc<Shared>,
    engine: Engine<FakeDriver, FakeApi, TokioClock>,
    leader: watch::Sender<bool>,
    _stop: watch::Sender<bool>,
}

fn rig_with(mode: Mode, vols: &[&str], page_size: i32, workers: usize, api: Arc<FakeApi>) -> Rig {
    let driver = Arc::new(FakeDriver::new());
    for v in vols {
        if !api.with(|s| s.claims.contains_key(*v)) {
            api.add_claim(v, None);
        }
    }
    let shared = Arc::new(Shared::default());
    let settings = EngineSettings {
        driver_name: DRIVER.into(),
        interval: INTERVAL,
        timeout: TIMEOUT,
        page_size,
        workers,
    };
    let engine = Engine::new(
        driver.clone(),
        api.clone(),
        Arc::new(TokioClock::new()),
        shared.clone(),
        settings,
        mode,
    );
    let (leader, leader_rx) = watch::channel(true);
    let (stop, stop_rx) = watch::channel(false);
    let writer = WriteLoop {
        writer: Arc::new(api.clone()),
        claims: api.clone(),
        shared: shared.clone(),
        limiter: RateLimiter::new(1000.0, 1000),
        leader: leader_rx,
        dropped_retry: INTERVAL * 10,
    };
    tokio::spawn(writer.run(async move {
        let mut rx = stop_rx;
        let _ = rx.wait_for(|v| *v).await;
    }));
    Rig {
        driver,
        api,
        shared,
        engine,
        leader,
        _stop: stop,
    }
}

fn rig(mode: Mode, vols: &[&str]) -> Rig {
    rig_with(mode, vols, 500, 10, Arc::new(FakeApi::default()))
}

/// Lets the writer drain everything that is ready (paused time only moves once all is idle).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

impl Rig {
    async fn cycle(&mut self) {
        self.engine.cycle(Instant::now()).await;
        settle().await;
    }
    fn metrics(&self) -> String {
        self.shared.metrics.encode()
    }
}

fn reasons(h: &Option<VolumeHealthStatus>) -> Vec<(String, String)> {
    h.as_ref()
        .and_then(|h| h.health_conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c: VolumeHealthCondition| (c.status, c.reason))
        .collect()
}

fn degraded(reason: &str) -> Vec<VolumeHealthEntry> {
    vec![entry(DEGRADED, reason, "slow")]
}

// ---------------------------------------------------------------- tests

#[test]
fn mode_follows_the_advertised_capabilities() {
    assert_eq!(
        Mode::from_capabilities(&ControllerHealthMode::List { get: true }),
        Mode::List { get: true }
    );
    assert_eq!(
        Mode::from_capabilities(&ControllerHealthMode::List { get: false }),
        Mode::List { get: false }
    );
    assert_eq!(
        Mode::from_capabilities(&ControllerHealthMode::Get),
        Mode::Get
    );
    assert_eq!(
        Mode::from_capabilities(&ControllerHealthMode::None),
        Mode::Off
    );
}

#[tokio::test(start_paused = true)]
async fn list_mode_lists_with_the_page_size_and_never_gets_for_detection() {
    let mut r = rig_with(
        Mode::List { get: true },
        &["vol-a", "vol-b", "vol-c"],
        2,
        10,
        Arc::new(FakeApi::default()),
    );
    for v in ["vol-a", "vol-b", "vol-c"] {
        r.driver.set(v, degraded("Slow"));
    }
    r.cycle().await;
    assert_eq!(r.driver.with(|s| s.list_max_entries.clone()), vec![2, 2]);
    assert!(r.driver.gets().is_empty());
    assert_eq!(r.api.patches().len(), 3);
    assert_eq!(
        reasons(&r.api.stored("vol-b")),
        vec![("Degraded".into(), "Slow".into())]
    );
}

#[tokio::test(start_paused = true)]
async fn off_mode_probes_nothing() {
    let mut r = rig(Mode::Off, &["vol-a"]);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    assert_eq!(r.driver.with(|s| s.list_pages), 0);
    assert!(r.driver.gets().is_empty());
    assert!(r.api.patches().is_empty());
}

#[tokio::test(start_paused = true)]
async fn detection_writes_once_then_steady_state_writes_nothing() {
    let mut r = rig(Mode::List { get: true }, &["vol-a", "vol-b"]);
    r.driver
        .set("vol-a", vec![entry(INACCESSIBLE, "NoPath", "gone")]);
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 1);
    assert_eq!(r.api.event_reasons(), vec![REASON_DEGRADED]);
    let stored = r.api.stored("vol-a");
    for _ in 0..3 {
        tokio::time::advance(INTERVAL).await;
        r.cycle().await;
    }
    assert_eq!(r.api.patches().len(), 1, "no write while nothing changes");
    assert_eq!(r.api.stored("vol-a"), stored, "lastTransitionTime kept");
    assert!(r.metrics().contains(r#"csi_controller_volume_health_status{namespace="ns",persistentvolumeclaim="pvc-a",status="Inaccessible",reason="NoPath"} 1"#));
}

#[tokio::test(start_paused = true)]
async fn list_without_get_clears_only_after_two_complete_cycles() {
    let mut r = rig(Mode::List { get: false }, &["vol-a"]);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    r.driver.set("vol-a", vec![]);
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 1, "one absence is not a recovery");
    assert!(r.api.stored("vol-a").is_some());
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 2);
    assert_eq!(r.api.stored("vol-a"), None);
    assert_eq!(
        r.api.event_reasons(),
        vec![REASON_DEGRADED, REASON_RECOVERED]
    );
    assert!(
        !r.metrics().contains("persistentvolumeclaim=\"pvc-a\""),
        "series removed on recovery"
    );
}

#[tokio::test(start_paused = true)]
async fn list_with_get_confirms_a_recovery_at_once() {
    let mut r = rig(Mode::List { get: true }, &["vol-a", "vol-b"]);
    r.driver.set("vol-a", degraded("Slow"));
    r.driver.set("vol-b", degraded("Slow"));
    r.cycle().await;
    r.driver.set("vol-a", vec![]);
    r.cycle().await;
    assert_eq!(
        r.driver.gets(),
        vec!["vol-a".to_string()],
        "only the absent one is confirmed"
    );
    assert_eq!(r.api.stored("vol-a"), None);
    assert!(r.api.stored("vol-b").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_failed_confirming_get_keeps_the_conditions() {
    let mut r = rig(Mode::List { get: true }, &["vol-a"]);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    r.driver.set("vol-a", vec![]);
    r.driver.with(|s| s.fail_get = Some(tonic::Code::Internal));
    r.cycle().await;
    assert!(r.api.stored("vol-a").is_some());
    assert_eq!(r.api.patches().len(), 1);
    assert!(r.metrics().contains(r#"csi_volume_health_probe_total{driver_name="fake.csi.example.com",method="ControllerGetVolumeHealth",result="error"} 1"#));
}

#[tokio::test(start_paused = true)]
async fn a_confirming_get_that_still_reports_keeps_the_conditions() {
    let mut r = rig(Mode::List { get: true }, &["vol-a"]);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    r.driver.with(|s| s.omit.insert("vol-a".into()));
    r.cycle().await;
    r.cycle().await;
    assert_eq!(r.driver.gets().len(), 2);
    assert_eq!(
        r.api.patches().len(),
        1,
        "Get says it is still degraded: nothing changes"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_page_keeps_everything_and_the_cycle_counts_for_nothing() {
    let vols = ["vol-a", "vol-b", "vol-c"];
    let mut r = rig_with(
        Mode::List { get: false },
        &vols,
        1,
        10,
        Arc::new(FakeApi::default()),
    );
    for v in vols {
        r.driver.set(v, degraded("Slow"));
    }
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 3);
    for v in vols {
        r.driver.set(v, vec![]);
    }
    // Everything recovered, but the page fails: nothing may be cleared or counted.
    let next_page = r.driver.with(|s| s.list_pages);
    r.driver.with(|s| s.fail_list_page = Some(next_page));
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 3);
    r.cycle().await; // first complete absence
    assert_eq!(
        r.api.patches().len(),
        3,
        "the failed cycle did not count as an absence"
    );
    r.cycle().await; // second complete absence
    assert_eq!(r.api.patches().len(), 6);
    assert!(
        r.metrics()
            .contains(r#"method="ControllerListVolumeHealth",result="error"} 1"#)
    );
}

#[tokio::test(start_paused = true)]
async fn the_deadline_is_per_page_not_per_pass() {
    let vols = ["vol-a", "vol-b", "vol-c"];
    let mut r = rig_with(
        Mode::List { get: false },
        &vols,
        1,
        10,
        Arc::new(FakeApi::default()),
    );
    for v in vols {
        r.driver.set(v, degraded("Slow"));
    }
    // Three pages of 10s each: 30s in all, more than the 15s timeout, and still complete.
    r.driver.with(|s| s.list_delay = Duration::from_secs(10));
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 3);
    // A page that never answers ends the cycle after one timeout.
    let next_page = r.driver.with(|s| s.list_pages) + 1;
    r.driver.with(|s| {
        s.hang_list_page = Some(next_page);
        s.list_delay = Duration::ZERO;
    });
    let start = Instant::now();
    r.engine.cycle(Instant::now()).await;
    assert_eq!(start.elapsed(), TIMEOUT);
    assert!(
        r.metrics()
            .contains(r#"method="ControllerListVolumeHealth",result="error"} 1"#)
    );
}

#[tokio::test(start_paused = true)]
async fn duplicates_and_omissions_cause_no_false_clear() {
    let vols = ["vol-a", "vol-b", "vol-c", "vol-d"];
    let mut r = rig_with(
        Mode::List { get: false },
        &vols,
        1,
        10,
        Arc::new(FakeApi::default()),
    );
    for v in vols {
        r.driver.set(v, degraded("Slow"));
    }
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 4);
    // Stale duplicates with empty statuses on every page: nothing clears.
    r.driver.with(|s| s.stale_empty_duplicates = true);
    for _ in 0..3 {
        r.cycle().await;
    }
    assert_eq!(r.api.patches().len(), 4);
    // One volume omitted in one cycle, then back: nothing clears.
    r.driver.with(|s| s.omit.insert("vol-b".into()));
    r.cycle().await;
    r.driver.with(|s| s.omit.clear());
    r.cycle().await;
    r.driver.with(|s| s.omit.insert("vol-b".into()));
    r.cycle().await;
    r.driver.with(|s| s.omit.clear());
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 4);
    for v in vols {
        assert!(r.api.stored(v).is_some(), "{v} kept");
    }
}

#[tokio::test(start_paused = true)]
async fn get_mode_spreads_the_calls_over_the_interval() {
    let mut r = rig(Mode::Get, &["vol-a", "vol-b", "vol-c", "vol-d"]);
    r.cycle().await;
    let calls = r.driver.with(|s| s.get_calls.clone());
    let at: Vec<u64> = calls.iter().map(|(_, t)| t.as_secs()).collect();
    assert_eq!(at, vec![0, 15, 30, 45]);
    let mut vols: Vec<String> = calls.into_iter().map(|(v, _)| v).collect();
    vols.sort();
    assert_eq!(vols, vec!["vol-a", "vol-b", "vol-c", "vol-d"]);
}

#[tokio::test(start_paused = true)]
async fn get_mode_probes_each_volume_once_per_cycle_with_few_volumes() {
    let mut r = rig(Mode::Get, &["vol-a", "vol-b"]);
    for _ in 0..3 {
        let start = Instant::now();
        r.cycle().await;
        tokio::time::sleep_until(start + INTERVAL).await;
    }
    let gets = r.driver.gets();
    assert_eq!(gets.len(), 6);
    assert_eq!(gets.iter().filter(|v| *v == "vol-a").count(), 3);
}

#[tokio::test(start_paused = true)]
async fn get_mode_keeps_at_most_the_worker_limit_in_flight() {
    let vols: Vec<String> = (0..20).map(|i| format!("vol-{i:02}")).collect();
    let refs: Vec<&str> = vols.iter().map(String::as_str).collect();
    let mut r = rig_with(Mode::Get, &refs, 500, 3, Arc::new(FakeApi::default()));
    // Each call takes 10s while one starts every 3s: without a limit 4 would overlap.
    r.driver.with(|s| s.get_delay = Duration::from_secs(10));
    r.cycle().await;
    assert_eq!(r.driver.with(|s| s.max_inflight), 3);
    let mut gets = r.driver.gets();
    gets.sort();
    assert_eq!(gets, vols, "every volume exactly once");
}

#[tokio::test(start_paused = true)]
async fn get_mode_clears_on_an_empty_answer_and_keeps_on_error() {
    let mut r = rig(Mode::Get, &["vol-a"]);
    r.driver.set("vol-a", vec![entry(3, "Lost", "blocks gone")]);
    r.cycle().await;
    assert_eq!(
        reasons(&r.api.stored("vol-a")),
        vec![("DataLoss".into(), "Lost".into())]
    );
    r.driver.set("vol-a", vec![]);
    r.driver
        .with(|s| s.fail_get = Some(tonic::Code::Unavailable));
    r.cycle().await;
    assert!(
        r.api.stored("vol-a").is_some(),
        "a failed RPC is not a recovery"
    );
    r.driver.with(|s| s.fail_get = None);
    r.cycle().await;
    assert_eq!(
        r.api.stored("vol-a"),
        None,
        "an empty answer clears at once"
    );
}

#[tokio::test(start_paused = true)]
async fn pending_updates_for_one_claim_coalesce_and_an_unreachable_api_is_retried() {
    let mut r = rig(Mode::Get, &["vol-a"]);
    r.api.with(|s| s.unavailable = true);
    r.driver.set("vol-a", degraded("First"));
    r.cycle().await; // the write fails; the writer backs off
    r.driver.set("vol-a", degraded("Second"));
    r.engine.cycle(Instant::now()).await;
    r.driver.set("vol-a", degraded("Third"));
    r.engine.cycle(Instant::now()).await;
    r.api.with(|s| s.unavailable = false);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let patches = r.api.patches();
    assert_eq!(patches.len(), 1, "only the latest is written");
    assert_eq!(
        reasons(&patches[0].1),
        vec![("Degraded".into(), "Third".into())]
    );
    assert!(
        r.metrics()
            .contains(r#"csi_volume_health_status_writes_total{result="error"} 1"#)
    );
}

#[tokio::test(start_paused = true)]
async fn a_recovery_cancels_a_write_still_queued() {
    let mut r = rig(Mode::List { get: true }, &["vol-a"]);
    r.api.with(|s| s.unavailable = true);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await; // queued, not written
    r.driver.set("vol-a", vec![]);
    r.engine.cycle(Instant::now()).await; // absent → confirmed healthy by Get
    assert_eq!(r.driver.gets(), vec!["vol-a".to_string()]);
    r.api.with(|s| s.unavailable = false);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        r.api.patches().is_empty(),
        "the stale condition never lands"
    );
    assert_eq!(r.api.stored("vol-a"), None);
}

#[tokio::test(start_paused = true)]
async fn dropped_writes_are_counted_and_retried_slowly() {
    let mut r = rig(Mode::Get, &["vol-a"]);
    r.api.with(|s| s.drop_health = true);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 1);
    for _ in 0..9 {
        tokio::time::advance(INTERVAL).await;
        r.cycle().await;
    }
    assert_eq!(r.api.patches().len(), 1, "held back for 10 intervals");
    tokio::time::advance(INTERVAL).await;
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 2, "retried after 10 intervals");
    assert!(
        r.metrics()
            .contains("csi_volume_health_writes_dropped_total 2")
    );
    assert_eq!(
        r.api.event_reasons(),
        vec![REASON_DEGRADED],
        "one Event, not one per attempt"
    );
}

fn stored_status(reason: &str, message: &str) -> VolumeHealthStatus {
    VolumeHealthStatus {
        health_conditions: Some(vec![VolumeHealthCondition {
            status: "Degraded".into(),
            reason: reason.into(),
            message: Some(message.into()),
        }]),
        last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(1_700_000_000).unwrap(),
        )),
    }
}

#[tokio::test(start_paused = true)]
async fn a_restart_with_unchanged_health_writes_nothing() {
    for mode in [
        Mode::List { get: true },
        Mode::List { get: false },
        Mode::Get,
    ] {
        let api = Arc::new(FakeApi::default());
        api.add_claim("vol-a", Some(stored_status("Slow", "slow")));
        api.add_claim("vol-b", None);
        let mut r = rig_with(mode, &["vol-a", "vol-b"], 500, 10, api);
        r.driver.set("vol-a", degraded("Slow"));
        for _ in 0..3 {
            r.cycle().await;
            tokio::time::advance(INTERVAL).await;
        }
        assert!(
            r.api.patches().is_empty(),
            "{mode:?}: the stored value is the starting state"
        );
        assert!(r.api.event_reasons().is_empty());
        assert!(
            r.metrics()
                .contains(r#"persistentvolumeclaim="pvc-a",status="Degraded",reason="Slow"} 1"#)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn after_a_restart_a_stored_condition_absent_from_the_list_is_not_cleared_at_once() {
    let api = Arc::new(FakeApi::default());
    api.add_claim("vol-a", Some(stored_status("Slow", "slow")));
    let mut r = rig_with(Mode::List { get: false }, &["vol-a"], 500, 10, api);
    r.cycle().await;
    assert!(r.api.patches().is_empty());
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 1);
    assert_eq!(r.api.stored("vol-a"), None);
}

#[tokio::test(start_paused = true)]
async fn unknown_values_raise_one_warning_per_transition_and_never_clear() {
    let api = Arc::new(FakeApi::default());
    api.add_claim("vol-a", Some(stored_status("Slow", "slow")));
    let mut r = rig_with(Mode::Get, &["vol-a"], 500, 10, api);
    r.driver.set("vol-a", vec![entry(9, "Future", "new kind")]);
    for _ in 0..3 {
        r.cycle().await;
    }
    assert!(
        r.api.patches().is_empty(),
        "unknown values are not written and clear nothing"
    );
    assert_eq!(r.api.event_reasons(), vec![REASON_UNKNOWN]);
    assert!(
        r.metrics()
            .contains(r#"csi_volume_health_unknown_condition_total{status="9"} 1"#)
    );
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    r.driver.set("vol-a", vec![entry(9, "Future", "new kind")]);
    r.cycle().await;
    assert_eq!(
        r.api.event_reasons(),
        vec![REASON_UNKNOWN, REASON_UNKNOWN],
        "a new transition warns again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lagging_cache_never_causes_a_second_write() {
    let api = Arc::new(FakeApi::default());
    api.with(|s| s.cache_lag = true);
    let mut r = rig_with(Mode::Get, &["vol-a"], 500, 10, api);
    r.driver.set("vol-a", degraded("Slow"));
    for _ in 0..4 {
        r.cycle().await;
    }
    assert_eq!(r.api.patches().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn volumes_without_a_bound_pv_are_counted_not_errors() {
    let mut r = rig(Mode::List { get: true }, &["vol-a"]);
    r.driver.set("vol-orphan", degraded("Slow"));
    r.cycle().await;
    assert!(r.api.patches().is_empty());
    assert!(r.metrics().contains("csi_volume_health_unmapped_volumes 1"));
}

#[tokio::test(start_paused = true)]
async fn a_follower_writes_nothing() {
    let mut r = rig(Mode::Get, &["vol-a"]);
    r.leader.send_replace(false);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    assert!(r.api.patches().is_empty());
}

struct FakeCaps {
    answers: Mutex<Vec<Result<DriverInfo, String>>>,
    calls: Mutex<usize>,
}

impl CapabilitySource for FakeCaps {
    async fn probe(&self) -> Result<DriverInfo, String> {
        *self.calls.lock().unwrap() += 1;
        let mut a = self.answers.lock().unwrap();
        if a.len() > 1 {
            a.remove(0)
        } else {
            a[0].clone()
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_loop_runs_only_while_leading_and_reprobes_after_connection_loss() {
    let r = rig(Mode::List { get: true }, &["vol-a"]);
    let caps = Arc::new(FakeCaps {
        answers: Mutex::new(vec![Ok(DriverInfo {
            driver_name: DRIVER.into(),
            mode: Mode::Get,
            violations: vec![],
        })]),
        calls: Mutex::new(0),
    });
    let (leader_tx, leader_rx) = watch::channel(false);
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let driver = r.driver.clone();
    driver.with(|s| s.fail_list_page = Some(0));
    let c = caps.clone();
    let task = tokio::spawn(async move {
        r.engine
            .run(c.as_ref(), leader_rx, async move {
                let _ = stop_rx.wait_for(|v| *v).await;
            })
            .await;
    });
    tokio::time::sleep(INTERVAL * 3).await;
    assert_eq!(
        driver.with(|s| s.list_pages),
        0,
        "a follower does not probe"
    );
    leader_tx.send_replace(true);
    settle().await;
    assert_eq!(
        driver.with(|s| s.list_pages),
        1,
        "the leader probes at once"
    );
    tokio::time::sleep(INTERVAL).await;
    assert_eq!(
        *caps.calls.lock().unwrap(),
        1,
        "connection loss → capabilities probed again"
    );
    assert_eq!(driver.gets(), vec!["vol-a".to_string()], "now in Get mode");
    leader_tx.send_replace(false);
    settle().await;
    let gets = driver.gets().len();
    tokio::time::sleep(INTERVAL * 3).await;
    assert_eq!(
        driver.gets().len(),
        gets,
        "probing stops when the lease is lost"
    );
    stop_tx.send_replace(true);
    task.await.unwrap();
}
