//! Many volumes changing health while status writes are slow (a backlog builds, cycles run while
//! writes are in flight) and the watch cache lags: no PATCH repeats what is stored, there is at
//! most one PATCH per transition, the last one is the driver's last answer, and
//! `lastTransitionTime` moves only when the set of (status, reason) changes, whatever the timing;
//! writes run concurrently, but never two for one object
//! (paused tokio time, so the interleavings are exact and repeatable).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking
#![allow(clippy::needless_range_loop)] // volumes are indices into several parallel tables

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_model::{
    Timestamp, VolumeHealthStatus, claim_conditions, same_conditions, same_keys, volume_report,
};
use volhealth_writer::events::Transition;
use volhealth_writer::{
    ApiFailure, Clock, EventRecorder, HealthEvent, ObjectRef, Offers, Patched, QueuedTarget,
    RateLimiter, StatusWriter, Stored, Target, TokioClock, WriteLoop, WriterMetrics,
};

type Health = Option<VolumeHealthStatus>;

const VOLUMES: usize = 200;
const INTERVAL: Duration = Duration::from_secs(1);
const PATCH_TAKES: Duration = Duration::from_millis(60);
const CACHE_LAG: Duration = Duration::from_secs(3);
const TRANSITION_EVERY: Duration = Duration::from_secs(8);
const RUN_FOR: Duration = Duration::from_secs(60);

/// One version of an object, as the API server stored it.
#[derive(Clone)]
struct Version {
    rv: u64,
    at: Instant,
    value: Health,
}

#[derive(Default)]
struct Api {
    history: Mutex<HashMap<usize, Vec<Version>>>,
    rv: Mutex<u64>,
    patches: Mutex<Vec<(usize, Health)>>,
    /// Writes in flight now, in all and per object, and the most seen of each.
    in_flight: Mutex<(usize, HashMap<usize, usize>, usize, usize)>,
}

impl Api {
    /// What a watch cache lagging CACHE_LAG behind shows.
    fn cached(&self, key: usize) -> Stored<Health> {
        let h = self.history.lock().unwrap();
        let seen = h
            .get(&key)
            .and_then(|versions| versions.iter().rev().find(|v| v.at.elapsed() >= CACHE_LAG));
        Stored {
            uid: None,
            resource_version: Some(seen.map_or(0, |v| v.rv).to_string()),
            value: seen.and_then(|v| v.value.clone()),
        }
    }
}

struct Pvcs {
    api: Arc<Api>,
    clock: TokioClock,
}

impl Target for Pvcs {
    type Key = usize;
    type Value = Health;

    fn resource(&self) -> &'static str {
        "persistentvolumeclaims/status"
    }

    async fn patch(&self, key: &usize, value: &Health) -> Result<Patched<Health>, ApiFailure> {
        {
            let mut f = self.api.in_flight.lock().unwrap();
            f.0 += 1;
            let mine = {
                let n = f.1.entry(*key).or_default();
                *n += 1;
                *n
            };
            f.2 = f.2.max(f.0);
            f.3 = f.3.max(mine);
        }
        tokio::time::sleep(PATCH_TAKES).await;
        {
            let mut f = self.api.in_flight.lock().unwrap();
            f.0 -= 1;
            if let Some(n) = f.1.get_mut(key) {
                *n -= 1;
            }
        }
        let rv = {
            let mut rv = self.api.rv.lock().unwrap();
            *rv += 1;
            *rv
        };
        self.api.patches.lock().unwrap().push((*key, value.clone()));
        self.api
            .history
            .lock()
            .unwrap()
            .entry(*key)
            .or_default()
            .push(Version {
                rv,
                at: Instant::now(),
                value: value.clone(),
            });
        Ok(Patched {
            resource_version: Some(rv.to_string()),
            value: value.clone(),
        })
    }

    fn transitions(
        &self,
        key: &usize,
        _stored: &Stored<Health>,
        before: &Health,
        after: &Health,
    ) -> Vec<HealthEvent> {
        let object = ObjectRef::claim("ns", &format!("pvc-{key}"), None);
        Transition::claim(&object, before, after)
            .event()
            .into_iter()
            .collect()
    }
}

impl QueuedTarget for Pvcs {
    fn cached(&self, key: &usize) -> Option<Stored<Health>> {
        Some(self.api.cached(*key))
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

fn entry(status: i32, reason: &str, message: &str) -> VolumeHealthEntry {
    VolumeHealthEntry {
        status,
        reason: reason.into(),
        message: message.into(),
    }
}

/// The driver's answer for a volume at step `n` of its cycle of states: healthy, degraded,
/// the same with a new message, a second condition, healthy again...
fn truth(step: usize) -> Vec<VolumeHealthEntry> {
    match step % 4 {
        0 => vec![],
        1 => vec![entry(1, "SlowIo", "p99 80ms")],
        2 => vec![entry(1, "SlowIo", "p99 95ms")],
        _ => vec![entry(1, "SlowIo", "p99 95ms"), entry(2, "PathDown", "")],
    }
}

/// Which step volume `v` is at `elapsed` into the run (each volume has its own phase).
fn step_at(v: usize, elapsed: Duration) -> usize {
    let phase = Duration::from_millis((v as u64 * 37) % TRANSITION_EVERY.as_millis() as u64);
    if elapsed < phase {
        0
    } else {
        1 + ((elapsed - phase).as_millis() / TRANSITION_EVERY.as_millis()) as usize
    }
}

#[tokio::test(start_paused = true)]
async fn one_patch_per_transition_and_transition_times_move_only_with_the_key_set() {
    let api = Arc::new(Api::default());
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Arc::new(WriterMetrics::new(&mut registry));
    let events = Arc::new(EventRecorder::new(metrics.clone()));
    let offers = Offers::new(StatusWriter::new(
        Pvcs {
            api: api.clone(),
            clock: TokioClock::new(),
        },
        INTERVAL,
        metrics,
        events.clone(),
    ));
    let (_leader_tx, leader_rx) = watch::channel(true);
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let writing = tokio::spawn(
        WriteLoop {
            offers: offers.clone(),
            limiter: RateLimiter::new(200.0, 50),
            leader: leader_rx,
            max_in_flight: volhealth_writer::MAX_WRITES_IN_FLIGHT,
        }
        .run(async move {
            let _ = stop_rx.wait_for(|v| *v).await;
        }),
    );

    let start = Instant::now();
    let mut transitions = vec![0usize; VOLUMES];
    let mut last_step = vec![0usize; VOLUMES];
    while start.elapsed() < RUN_FOR {
        // One probe cycle: every volume's report, offered as the writers do (queued when it
        // would change what is stored, against the overlay-corrected cache).
        for v in 0..VOLUMES {
            let step = step_at(v, start.elapsed());
            if step != last_step[v] {
                transitions[v] += step - last_step[v];
                last_step[v] = step;
            }
            offers.offer(v, volume_report(&truth(step)));
        }
        tokio::time::sleep(INTERVAL).await;
    }
    // Keep probing the final answers until the backlog is written.
    for _ in 0..120 {
        for v in 0..VOLUMES {
            offers.offer(v, volume_report(&truth(last_step[v])));
        }
        tokio::time::sleep(INTERVAL).await;
    }
    stop_tx.send_replace(true);
    writing.await.unwrap();

    let patches = api.patches.lock().unwrap().clone();
    let mut by_volume: HashMap<usize, Vec<Health>> = HashMap::new();
    for (v, h) in patches {
        by_volume.entry(v).or_default().push(h);
    }
    let mut total = 0;
    for v in 0..VOLUMES {
        let written = by_volume.remove(&v).unwrap_or_default();
        total += written.len();
        // Transitions closer together than the backlog coalesce; never more than one each.
        assert!(
            written.len() <= transitions[v] && (transitions[v] == 0 || !written.is_empty()),
            "volume {v}: {} PATCHes for {} transitions",
            written.len(),
            transitions[v]
        );
        let mut previous: Health = None;
        for h in &written {
            assert!(
                !same_conditions(
                    claim_conditions(previous.as_ref()),
                    claim_conditions(h.as_ref())
                ),
                "volume {v}: a PATCH that changes nothing"
            );
            if let (Some(p), Some(n)) = (&previous, h) {
                let (pt, nt): (&Option<Time>, &Option<Time>) =
                    (&p.last_transition_time, &n.last_transition_time);
                if same_keys(
                    claim_conditions(previous.as_ref()),
                    claim_conditions(h.as_ref()),
                ) {
                    assert_eq!(
                        pt, nt,
                        "volume {v}: lastTransitionTime moved without a change of (status, reason)"
                    );
                } else {
                    assert_ne!(
                        pt, nt,
                        "volume {v}: a new (status, reason) set keeps the old time"
                    );
                }
            }
            previous = h.clone();
        }
        let expected = volume_report(&truth(last_step[v]));
        assert!(
            same_conditions(claim_conditions(previous.as_ref()), &expected.conditions),
            "volume {v}: the last write is the driver's last answer"
        );
    }
    assert!(
        total >= VOLUMES * 5,
        "the run exercised many transitions ({total})"
    );
    assert!(!events.is_empty(), "transitions raised Events");
    let (_, _, most, most_per_object) = *api.in_flight.lock().unwrap();
    assert!(
        most > 1 && most <= volhealth_writer::MAX_WRITES_IN_FLIGHT,
        "the backlog is written concurrently, within the bound ({most} at once)"
    );
    assert_eq!(
        most_per_object, 1,
        "never two writes for one object at once"
    );
}
