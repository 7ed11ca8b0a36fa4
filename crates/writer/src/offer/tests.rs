//! The offer path decides once: for one report, one no-op decision and one read of the
//! own-writes overlay per object, however far the report goes (queued, written, or dropped as a
//! no-op); a second decision only when the object changed under the first.

use super::*;
use crate::events::EventRecorder;
use crate::metrics::WriterMetrics;
use crate::{ApiFailure, HealthEvent, Patched};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A health field that counts its decisions: a level, 0 being healthy.
#[derive(Debug, Clone, PartialEq)]
struct Level(u32);

/// A report of a level, with the counter of decisions taken on it.
#[derive(Debug, Clone)]
struct Reported {
    level: u32,
    decisions: Arc<AtomicUsize>,
}

impl HealthField for Level {
    type Report = Reported;

    fn reconcile(&self, report: &Reported, _now: Timestamp) -> Option<Change<Self>> {
        report.decisions.fetch_add(1, Ordering::SeqCst);
        (report.level != self.0).then_some(Change {
            value: Level(report.level),
            priority: 0,
        })
    }

    fn merge(_newer: &mut Reported, _older: Reported) {}

    fn is_empty(&self) -> bool {
        self.0 == 0
    }
}

/// Objects in a cache the test moves by hand, and the patches the writer sent.
#[derive(Default)]
struct Objects {
    cache: Mutex<HashMap<u32, Stored<Level>>>,
    patches: Mutex<Vec<(u32, Level)>>,
}

impl Objects {
    fn store(&self, key: u32, rv: u32, level: u32) {
        self.cache.lock().unwrap().insert(
            key,
            Stored {
                uid: None,
                resource_version: Some(rv.to_string()),
                value: Level(level),
            },
        );
    }

    fn patches(&self) -> Vec<(u32, Level)> {
        self.patches.lock().unwrap().clone()
    }
}

impl Target for Arc<Objects> {
    type Key = u32;
    type Value = Level;

    fn resource(&self) -> &'static str {
        "persistentvolumeclaims/status"
    }

    async fn patch(&self, key: &u32, value: &Level) -> Result<Patched<Level>, ApiFailure> {
        self.patches.lock().unwrap().push((*key, value.clone()));
        // The API server's answer; the cache the writer reads does not show it yet.
        Ok(Patched {
            resource_version: Some("100".into()),
            value: value.clone(),
        })
    }

    fn transitions(&self, _: &u32, _: &Stored<Level>, _: &Level, _: &Level) -> Vec<HealthEvent> {
        Vec::new()
    }
}

impl QueuedTarget for Arc<Objects> {
    fn cached(&self, key: &u32) -> Option<Stored<Level>> {
        self.cache.lock().unwrap().get(key).cloned()
    }

    fn now(&self) -> Timestamp {
        Timestamp::UNIX_EPOCH
    }
}

fn offers() -> (Arc<Objects>, Offers<Arc<Objects>>) {
    let objects = Arc::new(Objects::default());
    let metrics = Arc::new(WriterMetrics::new(&mut Default::default()));
    let events = Arc::new(EventRecorder::new(metrics.clone()));
    let writer = StatusWriter::new(objects.clone(), Duration::from_secs(60), metrics, events);
    (objects, Offers::new(writer))
}

/// [`offers`] over object 7, stored at `level` (version 1).
fn offers_with_7_at(level: u32) -> (Arc<Objects>, Offers<Arc<Objects>>) {
    let (objects, offers) = offers();
    objects.store(7, 1, level);
    (objects, offers)
}

fn report(level: u32) -> (Reported, Arc<AtomicUsize>) {
    let decisions = Arc::new(AtomicUsize::new(0));
    let r = Reported {
        level,
        decisions: decisions.clone(),
    };
    (r, decisions)
}

/// Runs the write loop until everything queued is answered.
async fn drain(offers: &Offers<Arc<Objects>>) {
    let write_loop = offers.write_loop(RateLimiter::new(1000.0, 1000));
    let stop = tokio::sync::Notify::new();
    let run = write_loop.run(stop.notified());
    tokio::pin!(run);
    loop {
        tokio::select! {
            () = &mut run => return,
            () = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
        if offers.is_idle() {
            return;
        }
    }
}

#[tokio::test]
async fn a_report_that_changes_its_object_is_decided_once_and_written_once() {
    let (objects, offers) = offers_with_7_at(0);
    let (r, decisions) = report(3);
    assert!(offers.offer(7, r));
    drain(&offers).await;
    assert_eq!(objects.patches(), [(7, Level(3))]);
    assert_eq!(decisions.load(Ordering::SeqCst), 1, "one decision");
    assert_eq!(offers.writer().overlay_reads(), 1, "one overlay read");
}

#[tokio::test]
async fn a_report_that_changes_nothing_is_decided_once_and_never_queued() {
    let (objects, offers) = offers_with_7_at(2);
    let (r, decisions) = report(2);
    assert!(!offers.offer(7, r));
    assert!(offers.is_idle());
    assert_eq!(decisions.load(Ordering::SeqCst), 1);
    assert_eq!(offers.writer().overlay_reads(), 1);
    assert!(objects.patches().is_empty());
}

#[tokio::test]
async fn each_object_of_a_cycle_is_decided_once() {
    let (objects, offers) = offers();
    let mut counters = Vec::new();
    for key in 0..50 {
        objects.store(key, 1, key % 2);
        let (r, decisions) = report(1);
        offers.offer(key, r);
        counters.push(decisions);
    }
    drain(&offers).await;
    assert_eq!(
        objects.patches().len(),
        25,
        "the 25 objects at level 0 change"
    );
    for (key, decisions) in counters.iter().enumerate() {
        assert_eq!(decisions.load(Ordering::SeqCst), 1, "object {key}");
    }
    assert_eq!(offers.writer().overlay_reads(), 50);
}

#[tokio::test]
async fn an_object_changed_after_the_offer_is_decided_again_against_what_it_is_now() {
    let (objects, offers) = offers_with_7_at(0);
    let (r, decisions) = report(3);
    assert!(offers.offer(7, r));
    // Someone else stores level 3 before the write goes out: nothing is left to write.
    objects.store(7, 2, 3);
    drain(&offers).await;
    assert!(objects.patches().is_empty(), "{:?}", objects.patches());
    assert_eq!(decisions.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_report_that_replaces_a_waiting_one_is_queued_even_when_it_changes_nothing() {
    let (objects, offers) = offers_with_7_at(0);
    let (degraded, _) = report(3);
    assert!(offers.offer(7, degraded));
    // The volume recovered before the write went out: the stale write must not land.
    let (healthy, decisions) = report(0);
    assert!(offers.offer(7, healthy));
    assert_eq!(offers.pending(&7).map(|r| r.level), Some(0));
    drain(&offers).await;
    assert!(objects.patches().is_empty(), "{:?}", objects.patches());
    assert_eq!(
        decisions.load(Ordering::SeqCst),
        1,
        "its own decision stands"
    );
}

#[tokio::test]
async fn our_own_write_landing_makes_a_later_decision_stale() {
    let (objects, offers) = offers_with_7_at(0);
    let (first, _) = report(3);
    offers.offer(7, first);
    drain(&offers).await;
    assert_eq!(objects.patches(), [(7, Level(3))]);
    // The cache still shows level 0 at version 1, but the overlay knows level 3 is stored.
    let (same, decisions) = report(3);
    assert!(!offers.offer(7, same), "level 3 is what is stored");
    assert_eq!(decisions.load(Ordering::SeqCst), 1);
}

/// A report the write loop has taken but not yet written (it waits for the rate limit) is still
/// on its way: a probe cycle that ends meanwhile must not take the object for one with nothing
/// stored and nothing coming, and forget it. The write before it is answered meanwhile.
#[tokio::test]
async fn a_report_waiting_for_the_rate_limit_is_still_pending() {
    let (objects, offers) = offers();
    objects.store(7, 1, 0);
    objects.store(8, 1, 0);
    assert!(offers.offer(7, report(3).0));
    assert!(offers.offer(8, report(3).0));
    // One token now, the next in 100 s: the second write waits in the loop, out of the queue.
    let write_loop = offers.write_loop(RateLimiter::new(0.01, 1));
    let stop = tokio::sync::Notify::new();
    let run = write_loop.run(stop.notified());
    tokio::pin!(run);
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            tokio::select! {
                () = &mut run => panic!("the write loop ended"),
                () = tokio::time::sleep(Duration::from_millis(1)) => {}
            }
            if objects.patches().len() == 1 && offers.is_empty() {
                return;
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "the first write and the second take");
    let waiting = if objects.patches()[0].0 == 7 { 8 } else { 7 };
    assert!(
        offers.is_pending(&waiting),
        "taken for writing, not yet written: still pending"
    );
    assert!(!offers.is_idle());
}
