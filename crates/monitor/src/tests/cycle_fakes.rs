//! Fakes of the driver and the API server, and a rig running the cycles and the writer on
//! paused tokio time, shared by the cycle tests.

pub(crate) use crate::claim_target::{Health, HealthPatcher};
pub(crate) use crate::claims::{BoundClaim, ClaimKey, ClaimStore, StoredClaim};
pub(crate) use crate::engine::{
    CapabilityError, CapabilitySource, DriverInfo, Engine, EngineSettings, Mode, Shared,
};
pub(crate) use crate::source::{HealthSource, ListPage, ProbeError};
pub(crate) use std::collections::{BTreeMap, BTreeSet};
pub(crate) use std::sync::{Arc, Mutex};
pub(crate) use std::time::Duration;
pub(crate) use tokio::sync::watch;
pub(crate) use tokio::time::Instant;
pub(crate) use volhealth_csi::capabilities::ControllerHealthMode;
pub(crate) use volhealth_csi::v1::VolumeHealth;
pub(crate) use volhealth_csi::v1::volume_health::VolumeHealthEntry;
pub(crate) use volhealth_model::{VolumeHealthCondition, VolumeHealthStatus};
pub(crate) use volhealth_writer::events::{
    REASON_FIELD_DROPPED, REASON_UNKNOWN, REASON_VOLUME_DEGRADED as REASON_DEGRADED,
    REASON_VOLUME_RECOVERED as REASON_RECOVERED,
};
pub(crate) use volhealth_writer::{
    ApiFailure, EventSink, HealthEvent, MAX_WRITES_IN_FLIGHT, Patched, RateLimiter, TokioClock,
    WriteLoop,
};
pub(crate) const DRIVER: &str = "fake.csi.example.com";
pub(crate) const INTERVAL: Duration = Duration::from_secs(60);
pub(crate) const TIMEOUT: Duration = Duration::from_secs(15);
pub(crate) const DEGRADED: i32 = 1;
pub(crate) const INACCESSIBLE: i32 = 2;

pub(crate) fn entry(status: i32, reason: &str, message: &str) -> VolumeHealthEntry {
    VolumeHealthEntry {
        status,
        reason: reason.into(),
        message: message.into(),
    }
}

// ---------------------------------------------------------------- fake driver

#[derive(Default)]
pub(crate) struct DriverState {
    pub(crate) health: BTreeMap<String, Vec<VolumeHealthEntry>>,
    pub(crate) fail_list_page: Option<usize>,
    pub(crate) hang_list_page: Option<usize>,
    pub(crate) list_delay: Duration,
    /// Every page, even past the end, carries a token never given before.
    pub(crate) endless_tokens: bool,
    pub(crate) omit: BTreeSet<String>,
    pub(crate) stale_empty_duplicates: bool,
    pub(crate) fail_get: Option<tonic::Code>,
    pub(crate) get_delay: Duration,
    pub(crate) list_pages: usize,
    pub(crate) list_max_entries: Vec<i32>,
    pub(crate) get_calls: Vec<(String, Duration)>,
    pub(crate) inflight: usize,
    pub(crate) max_inflight: usize,
}

pub(crate) struct FakeDriver {
    pub(crate) st: Mutex<DriverState>,
    pub(crate) t0: Instant,
}

impl FakeDriver {
    pub(crate) fn new() -> Self {
        FakeDriver {
            st: Mutex::new(DriverState::default()),
            t0: Instant::now(),
        }
    }
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut DriverState) -> T) -> T {
        f(&mut self.st.lock().unwrap())
    }
    pub(crate) fn set(&self, vol: &str, entries: Vec<VolumeHealthEntry>) {
        self.with(|s| {
            if entries.is_empty() {
                s.health.remove(vol);
            } else {
                s.health.insert(vol.into(), entries);
            }
        });
    }
    pub(crate) fn gets(&self) -> Vec<String> {
        self.with(|s| s.get_calls.iter().map(|(v, _)| v.clone()).collect())
    }
}

#[async_trait::async_trait]
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
            let next_token = if s.endless_tokens {
                format!("{end}-{index}")
            } else if end < all.len() {
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
pub(crate) struct ApiState {
    pub(crate) claims: BTreeMap<String, BoundClaim>,
    /// Claims whose PV was deleted (or is being deleted) while they still name it, by volume id:
    /// no longer bound, still stored.
    pub(crate) released: BTreeMap<String, BoundClaim>,
    /// Claims that left Bound while still naming their PV, whose deletion is not seen yet.
    pub(crate) unbound: BTreeMap<String, BoundClaim>,
    pub(crate) rv: u64,
    pub(crate) patches: Vec<(ClaimKey, Option<VolumeHealthStatus>)>,
    pub(crate) events: Vec<HealthEvent>,
    pub(crate) drop_health: bool,
    pub(crate) unavailable: bool,
    pub(crate) cache_lag: bool,
}

#[derive(Default)]
pub(crate) struct FakeApi {
    pub(crate) st: Mutex<ApiState>,
}

impl FakeApi {
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut ApiState) -> T) -> T {
        f(&mut self.st.lock().unwrap())
    }
    pub(crate) fn add_claim(&self, vol: &str, stored: Option<VolumeHealthStatus>) {
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
                        health_annotation: None,
                    },
                },
            );
        });
    }
    /// Deletes the PV of `vol`: its claim stays, no longer bound (with a new uid when
    /// `recreated`, as a claim deleted and created again under the same name).
    /// The claim of `vol` leaves Bound (its phase changes, say to Lost) while it still names
    /// its PV, and the PV's deletion has not reached the cache yet.
    pub(crate) fn unbind(&self, vol: &str) {
        self.with(|s| {
            if let Some(c) = s.claims.remove(vol) {
                s.unbound.insert(vol.into(), c);
            }
        });
    }
    pub(crate) fn delete_pv(&self, vol: &str, recreated: bool) {
        self.with(|s| {
            if let Some(mut c) = s.claims.remove(vol).or_else(|| s.unbound.remove(vol)) {
                if recreated {
                    c.stored.uid.push_str("-again");
                }
                s.released.insert(vol.into(), c);
            }
        });
    }
    pub(crate) fn patches(&self) -> Vec<(ClaimKey, Option<VolumeHealthStatus>)> {
        self.with(|s| s.patches.clone())
    }
    pub(crate) fn stored(&self, vol: &str) -> Option<VolumeHealthStatus> {
        self.with(|s| {
            s.claims
                .get(vol)
                .or_else(|| s.released.get(vol))
                .or_else(|| s.unbound.get(vol))
                .and_then(|c| c.stored.health.clone())
        })
    }
    pub(crate) fn event_reasons(&self) -> Vec<&'static str> {
        self.with(|s| s.events.iter().map(|e| e.reason).collect())
    }
}

impl ClaimStore for FakeApi {
    fn bound_claims(&self, driver: &str) -> BTreeMap<String, BoundClaim> {
        assert_eq!(driver, DRIVER);
        self.with(|s| s.claims.clone())
    }
    fn claim(&self, key: &ClaimKey) -> Option<StoredClaim> {
        self.with(|s| {
            s.claims
                .values()
                .chain(s.released.values())
                .chain(s.unbound.values())
                .find(|c| &c.key == key)
                .map(|c| c.stored.clone())
        })
    }
    fn released(&self, pv_name: &str, key: &ClaimKey, uid: &str) -> bool {
        self.with(|s| {
            s.released
                .values()
                .any(|c| c.pv_name == pv_name && &c.key == key && c.stored.uid == uid)
        })
    }
    fn still_names(&self, pv_name: &str, key: &ClaimKey, uid: &str) -> bool {
        self.with(|s| {
            s.claims
                .values()
                .chain(s.released.values())
                .chain(s.unbound.values())
                .any(|c| c.pv_name == pv_name && &c.key == key && c.stored.uid == uid)
        })
    }
}

#[async_trait::async_trait]
impl HealthPatcher for FakeApi {
    async fn patch_health(
        &self,
        key: &ClaimKey,
        health: Option<&VolumeHealthStatus>,
    ) -> Result<Patched<Health>, ApiFailure> {
        self.with(|s| {
            if s.unavailable {
                return Err(ApiFailure {
                    code: None,
                    message: "connection refused".into(),
                });
            }
            s.patches.push((key.clone(), health.cloned()));
            s.rv += 1;
            let rv = s.rv.to_string();
            let (drop, lag) = (s.drop_health, s.cache_lag);
            let claim = s
                .claims
                .values_mut()
                .chain(s.released.values_mut())
                .chain(s.unbound.values_mut())
                .find(|c| &c.key == key)
                .ok_or(ApiFailure {
                    code: Some(404),
                    message: "not found".into(),
                })?;
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
                value: stored,
            })
        })
    }
}

#[async_trait::async_trait]
impl HealthPatcher for Arc<FakeApi> {
    async fn patch_health(
        &self,
        key: &ClaimKey,
        health: Option<&VolumeHealthStatus>,
    ) -> Result<Patched<Health>, ApiFailure> {
        self.as_ref().patch_health(key, health).await
    }
}

impl EventSink for FakeApi {
    async fn create(&self, event: &HealthEvent, _count: i32) -> Result<(), ApiFailure> {
        self.with(|s| s.events.push(event.clone()));
        Ok(())
    }
}

// ---------------------------------------------------------------- rig

pub(crate) struct Rig {
    pub(crate) driver: Arc<FakeDriver>,
    pub(crate) api: Arc<FakeApi>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) engine: Engine,
    pub(crate) leader: watch::Sender<bool>,
    pub(crate) _stop: watch::Sender<bool>,
}

pub(crate) fn rig_with(
    mode: Mode,
    vols: &[&str],
    page_size: i32,
    workers: usize,
    api: Arc<FakeApi>,
) -> Rig {
    let driver = Arc::new(FakeDriver::new());
    for v in vols {
        if !api.with(|s| s.claims.contains_key(*v)) {
            api.add_claim(v, None);
        }
    }
    let shared = Arc::new(Shared::new(
        api.clone(),
        api.clone(),
        Arc::new(TokioClock::new()),
        INTERVAL,
    ));
    let settings = EngineSettings {
        driver_name: DRIVER.into(),
        interval: INTERVAL,
        timeout: TIMEOUT,
        page_size,
        workers,
    };
    let engine = Engine::new(driver.clone(), shared.clone(), settings, mode);
    let (leader, leader_rx) = watch::channel(true);
    let (stop, stop_rx) = watch::channel(false);
    let writer = WriteLoop {
        offers: shared.offers.clone(),
        limiter: RateLimiter::new(1000.0, 1000),
        leader: leader_rx,
        max_in_flight: MAX_WRITES_IN_FLIGHT,
    };
    let mut stop_writer = stop_rx.clone();
    tokio::spawn(writer.run(async move {
        let _ = stop_writer.wait_for(|v| *v).await;
    }));
    let mut stop_events = stop_rx;
    tokio::spawn(shared.events.clone().run(
        api.clone(),
        RateLimiter::new(1000.0, 1000),
        async move {
            let _ = stop_events.wait_for(|v| *v).await;
        },
    ));
    Rig {
        driver,
        api,
        shared,
        engine,
        leader,
        _stop: stop,
    }
}

pub(crate) fn rig(mode: Mode, vols: &[&str]) -> Rig {
    rig_with(mode, vols, 500, 10, Arc::new(FakeApi::default()))
}

/// Lets the writer drain everything that is ready (paused time only moves once all is idle).
pub(crate) async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

impl Rig {
    pub(crate) async fn cycle(&mut self) {
        self.engine.cycle(Instant::now()).await;
        settle().await;
    }
    pub(crate) fn metrics(&self) -> String {
        self.shared.metrics.families.encode()
    }
}

pub(crate) fn reasons(h: &Option<VolumeHealthStatus>) -> Vec<(String, String)> {
    h.as_ref()
        .and_then(|h| h.health_conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c: VolumeHealthCondition| (c.status, c.reason))
        .collect()
}

pub(crate) fn degraded(reason: &str) -> Vec<VolumeHealthEntry> {
    vec![entry(DEGRADED, reason, "slow")]
}

pub(crate) fn stored_status(reason: &str, message: &str) -> VolumeHealthStatus {
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

pub(crate) struct FakeCaps {
    pub(crate) answers: Mutex<Vec<Result<DriverInfo, CapabilityError>>>,
    pub(crate) calls: Mutex<usize>,
}

#[async_trait::async_trait]
impl CapabilitySource for FakeCaps {
    async fn probe(&self) -> Result<DriverInfo, CapabilityError> {
        *self.calls.lock().unwrap() += 1;
        let mut a = self.answers.lock().unwrap();
        if a.len() > 1 {
            a.remove(0)
        } else {
            a[0].clone()
        }
    }
}

/// An engine's run loop in a task, leader from the start, with a driver that is never asked for
/// its capabilities again (no connection is lost).
pub(crate) struct Running {
    stop: watch::Sender<bool>,
    _leader: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Starts `engine`'s run loop.
    pub(crate) fn start(engine: Engine) -> Running {
        let caps = FakeCaps {
            answers: Mutex::new(vec![Err(CapabilityError::Capabilities("unused".into()))]),
            calls: Mutex::new(0),
        };
        let (leader, leader_rx) = watch::channel(true);
        let (stop, mut stop_rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            engine
                .run(&caps, leader_rx, async move {
                    let _ = stop_rx.wait_for(|v| *v).await;
                })
                .await;
        });
        Running {
            stop,
            _leader: leader,
            task,
        }
    }

    /// Asks the loop to shut down and waits until it has.
    pub(crate) async fn stop(self) {
        self.stop.send_replace(true);
        self.task.await.unwrap();
    }
}
