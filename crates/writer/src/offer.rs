//! The one path from a driver's report to a PATCH, the same for every object both writers write.
//!
//! A probe cycle hands [`Offers::offer`] an object's key and its report, and nothing else. From
//! there, each step is taken once, here:
//!
//! 1. the object as its cache shows it ([`QueuedTarget::cached`]), and what is stored now: the
//!    own-writes overlay, read once;
//! 2. a report still waiting in the queue is merged under the new one ([`HealthField::merge`]);
//! 3. the one decision: the value to store and its place in line, or nothing would change
//!    ([`HealthField::reconcile`], the KEP's rules);
//! 4. an object held back after a refused write is left alone;
//! 5. queued, with the decision and the version of the object it was taken against;
//! 6. the write loop ([`WriteLoop`]) takes it, writes the decided value when the object is still
//!    as it was decided against (deciding again only when it is not: someone changed it, or our
//!    own write landed meanwhile), under the rate limit and the holds;
//! 7. the PATCH and its outcome ([`StatusWriter::write`]).

use crate::field::{Change, HealthField};
use crate::queue::WriteQueue;
use crate::rate_limit::RateLimiter;
use crate::status::{Outcome, StatusWriter, Stored, Target};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::Instant;
use volhealth_model::Timestamp;

/// What a cycle hands over for an object of `T`.
pub type ReportOf<T> = <<T as Target>::Value as HealthField>::Report;

/// A [`Target`] whose writes go through the offer path: it can read its cache, and tell the time
/// `lastTransitionTime` is taken from.
pub trait QueuedTarget: Target {
    /// The object as cached now; `None` when it is gone.
    fn cached(&self, key: &Self::Key) -> Option<Stored<Self::Value>>;
    /// Now, for `lastTransitionTime`.
    fn now(&self) -> Timestamp;
    /// Hears what is stored for `key` when a report for it is offered (series that follow what
    /// is stored). Nothing by default.
    fn observed(&self, _key: &Self::Key, _stored: &Self::Value, _report: &ReportOf<Self>) {}
    /// Hears how a write for `report` ended (after the writer has counted and logged it), for
    /// what only the component can do about it, such as stopping on a refusal that means its
    /// credentials are for another node. Nothing by default.
    fn answered(
        &self,
        _key: &Self::Key,
        _report: &ReportOf<Self>,
        _outcome: &Outcome<Self::Value>,
    ) {
    }
}

/// The decision an offer took, and what it was taken against.
#[derive(Debug, Clone)]
struct Decision<V> {
    /// The cached object's resourceVersion then.
    resource_version: Option<String>,
    /// Our own last write of the object then ([`StatusWriter::own_write`]).
    own_write: u64,
    /// What was stored then.
    before: V,
    /// What to store instead; `None`: nothing would change (the report only replaced a stale one).
    change: Option<Change<V>>,
}

/// A report waiting in the queue, with its decision.
#[derive(Debug, Clone)]
pub struct Queued<V, R> {
    report: R,
    decision: Decision<V>,
}

/// A queued report of an object of `T`.
type QueuedOf<T> = Queued<<T as Target>::Value, ReportOf<T>>;
type QueueOf<T> = WriteQueue<<T as Target>::Key, QueuedOf<T>>;
/// The newest report of each object whose write is in flight, and its place in line.
type Parked<T> = HashMap<<T as Target>::Key, (QueuedOf<T>, usize)>;

/// A writer's offer path for one object kind: its write path and its queue.
pub struct Offers<T: QueuedTarget> {
    writer: Arc<StatusWriter<T>>,
    queue: Arc<QueueOf<T>>,
}

impl<T: QueuedTarget> Clone for Offers<T> {
    fn clone(&self) -> Self {
        Offers {
            writer: self.writer.clone(),
            queue: self.queue.clone(),
        }
    }
}

impl<T: QueuedTarget> Offers<T>
where
    T::Key: Ord,
{
    /// The offer path of `writer`, with an empty queue.
    pub fn new(writer: StatusWriter<T>) -> Self {
        Offers {
            writer: Arc::new(writer),
            queue: Arc::new(WriteQueue::new()),
        }
    }

    /// The write path.
    pub fn writer(&self) -> &Arc<StatusWriter<T>> {
        &self.writer
    }

    /// The target.
    pub fn target(&self) -> &T {
        self.writer.target()
    }

    /// Hands over `report` for the object `key`. Returns whether a write was queued: it would
    /// change what is stored, or it replaces a report still waiting (which must not land after
    /// this one, even when this one changes nothing). An object held back after a refused or
    /// dropped write is left alone: a cycle after the hold asks again.
    pub fn offer(&self, key: T::Key, mut report: ReportOf<T>) -> bool {
        let target = self.writer.target();
        let Some(stored) = target.cached(&key) else {
            return false;
        };
        let (before, own_write) = self.writer.effective_at(&key, &stored);
        target.observed(&key, &before, &report);
        let pending = self.queue.pending(&key);
        let supersedes = pending.is_some();
        if let Some(older) = pending {
            T::Value::merge(&mut report, older.report);
        }
        let change = before.reconcile(&report, target.now());
        let changes = change.is_some();
        if !(changes || supersedes) {
            return false;
        }
        if changes && !supersedes && self.writer.is_held(&key) {
            return false;
        }
        let priority = change.as_ref().map_or(usize::MAX, |c| c.priority);
        let decision = Decision {
            resource_version: stored.resource_version,
            own_write,
            before,
            change,
        };
        self.queue.push(key, Queued { report, decision }, priority);
        true
    }

    /// The report not yet stored for `key`, if any: queued, or being written.
    pub fn pending(&self, key: &T::Key) -> Option<ReportOf<T>> {
        self.queue.pending(key).map(|q| q.report)
    }

    /// Whether a report for `key` is queued or being written.
    pub fn is_pending(&self, key: &T::Key) -> bool {
        self.queue.has_pending(key)
    }

    /// Number of objects with a queued write.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether nothing is queued and no write is in flight.
    pub fn is_idle(&self) -> bool {
        self.queue.is_idle()
    }

    /// Drops everything queued (leadership lost: another replica writes now).
    pub fn clear(&self) {
        self.queue.clear();
    }

    /// The loop that drains the queue, without leader election (it always writes), with up to
    /// [`MAX_WRITES_IN_FLIGHT`] writes at once.
    pub fn write_loop(&self, limiter: RateLimiter) -> WriteLoop<T> {
        // The sender is dropped at once: the receiver keeps reading `true`.
        let (_, leader) = watch::channel(true);
        WriteLoop {
            offers: self.clone(),
            limiter,
            leader,
            max_in_flight: MAX_WRITES_IN_FLIGHT,
        }
    }
}

/// Most status writes a [`WriteLoop`] has in flight at once (as upstream's sidecar runs its
/// writes on worker goroutines): a correlated failure reaches status at this many times the
/// API server's latency, while the rate limit still paces the whole.
pub const MAX_WRITES_IN_FLIGHT: usize = 16;

/// The writer draining a queue: up to `max_in_flight` writes at once, never two for one object
/// (a newer report for an object being written waits for that write to finish, then is decided
/// again against what it stored).
pub struct WriteLoop<T: QueuedTarget> {
    /// The offer path whose queue it drains.
    pub offers: Offers<T>,
    /// `--kube-api-qps` / `--kube-api-burst` for status writes.
    pub limiter: RateLimiter,
    /// Whether this replica leads (always true without leader election).
    pub leader: watch::Receiver<bool>,
    /// Most writes in flight at once ([`MAX_WRITES_IN_FLIGHT`] by default; at least 1).
    pub max_in_flight: usize,
}

/// What [`WriteLoop`] does with a report it took from the queue.
enum Prepared<V> {
    /// Nothing to write: not leading, the object is gone, nothing would change, or it is held.
    Nothing,
    /// Not now: the API server is unreachable; queued again.
    Later,
    /// Write `after` over `before`, decided against `stored`.
    Write {
        stored: Stored<V>,
        before: V,
        after: V,
    },
}

/// A decided write waiting for its rate-limit token.
struct Ready<T: QueuedTarget> {
    /// When its token is due.
    due: Instant,
    key: T::Key,
    queued: QueuedOf<T>,
    priority: usize,
    stored: Stored<T::Value>,
    before: T::Value,
    after: T::Value,
}

/// Sleeps until `due`; never when there is none.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// One finished write: what it was for, and how it ended.
struct Done<T: QueuedTarget> {
    key: T::Key,
    queued: QueuedOf<T>,
    priority: usize,
    outcome: Outcome<T::Value>,
}

impl<T: QueuedTarget> WriteLoop<T>
where
    T::Key: Ord,
{
    /// Writes until `shutdown` completes; writes still in flight then are abandoned (the next
    /// leader, or the next start, reconciles from what is stored).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let max = self.max_in_flight.max(1);
        let writer = self.offers.writer.clone();
        let queue = self.offers.queue.clone();
        let mut in_flight = FuturesUnordered::new();
        // The newest report of an object whose write is in flight.
        let mut parked: Parked<T> = HashMap::new();
        // The next write, decided and waiting for its rate-limit token. It waits in the loop's
        // one select, so the writes in flight are answered meanwhile.
        let mut ready: Option<Ready<T>> = None;
        loop {
            if in_flight.is_empty()
                && let Some(until) = writer.unreachable_until()
            {
                tokio::select! {
                    _ = &mut shutdown => return,
                    _ = tokio::time::sleep_until(until) => {}
                }
            }
            let due = ready.as_ref().map(|r| r.due);
            let taken = tokio::select! {
                _ = &mut shutdown => return,
                Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                    self.finished(done, &mut parked);
                    continue;
                }
                () = sleep_until(due), if due.is_some() => {
                    let Some(r) = ready.take() else { continue };
                    // Checked again right before the write: a replica that lost the lease
                    // stops at once.
                    if !*self.leader.borrow() {
                        queue.answered(&r.key, None);
                        continue;
                    }
                    let writer = writer.clone();
                    in_flight.push(async move {
                        let outcome = writer.write(&r.key, &r.stored, &r.before, r.after).await;
                        Done::<T> {
                            key: r.key,
                            queued: r.queued,
                            priority: r.priority,
                            outcome,
                        }
                    });
                    continue;
                }
                // While the API server is unreachable, no new write starts before the ones in
                // flight have answered (and the backoff has passed).
                item = queue.next(), if ready.is_none() && in_flight.len() < max
                    && (in_flight.is_empty() || writer.unreachable_until().is_none()) => item,
            };
            let (key, queued, priority) = (taken.key, taken.desired, taken.priority);
            if taken.behind {
                // A newer report of an object being written: it goes when that write answers.
                parked.insert(key, (queued, priority));
                continue;
            }
            // From here the object counts as being written: each way out that starts no write
            // answers it, so it never looks as though nothing were on its way.
            match self.prepare(&key, &queued) {
                Prepared::Nothing => queue.answered(&key, None),
                Prepared::Later => queue.answered(&key, Some((queued, priority))),
                Prepared::Write {
                    stored,
                    before,
                    after,
                } => {
                    ready = Some(Ready {
                        due: self.limiter.reserve(),
                        key,
                        queued,
                        priority,
                        stored,
                        before,
                        after,
                    });
                }
            }
        }
    }

    /// What to write for `queued`, taken for `key`: what is stored, and what to write over it;
    /// or why nothing is written now. Held objects cost no rate-limit token.
    fn prepare(&self, key: &T::Key, queued: &QueuedOf<T>) -> Prepared<T::Value> {
        if !*self.leader.borrow() {
            return Prepared::Nothing;
        }
        let writer = &self.offers.writer;
        let Some(stored) = writer.target().cached(key) else {
            tracing::debug!(object = %key, "the object is gone; nothing to write");
            return Prepared::Nothing;
        };
        let Some((before, after)) = self.decided(key, &stored, queued) else {
            return Prepared::Nothing;
        };
        if !writer.may_write(key) {
            return if writer.unreachable_until().is_some() {
                Prepared::Later
            } else {
                Prepared::Nothing
            };
        }
        Prepared::Write {
            stored,
            before,
            after,
        }
    }

    /// What to write over `stored` for `queued`: the offer's decision while the object is as it
    /// was decided against, else a new decision; `None` when nothing would change.
    fn decided(
        &self,
        key: &T::Key,
        stored: &Stored<T::Value>,
        queued: &QueuedOf<T>,
    ) -> Option<(T::Value, T::Value)> {
        let writer = &self.offers.writer;
        let d = &queued.decision;
        if d.resource_version == stored.resource_version && d.own_write == writer.own_write(key) {
            let change = d.change.as_ref()?;
            return Some((d.before.clone(), change.value.clone()));
        }
        let (before, _) = writer.effective_at(key, stored);
        let change = before.reconcile(&queued.report, writer.target().now())?;
        Some((before, change.value))
    }

    /// Handles a finished write: a failed one is tried again, unless a newer report arrived
    /// while it was in flight, which goes next instead.
    fn finished(&self, done: Done<T>, parked: &mut Parked<T>) {
        self.offers
            .writer
            .target()
            .answered(&done.key, &done.queued.report, &done.outcome);
        let again = parked.remove(&done.key).or(match done.outcome {
            Outcome::Unavailable | Outcome::Conflict => Some((done.queued, done.priority)),
            Outcome::Written(_)
            | Outcome::Held
            | Outcome::Dropped
            | Outcome::Refused(_)
            | Outcome::Forbidden(_)
            | Outcome::Gone => None,
        });
        self.offers.queue.answered(&done.key, again);
    }
}

#[cfg(test)]
mod tests;
