//! The keyed coalescing queue between probe cycles and a single writer, and the loop that drains
//! it. Several pending updates for one object collapse into the latest; the most severe go first
//! (Inaccessible, DataLoss, Degraded, then recoveries), first come first within a severity; and
//! what would be a no-op is found before a rate-limit token is spent on it.

use crate::rate_limit::RateLimiter;
use crate::status::{Outcome, StatusWriter, Stored, Target};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, watch};

#[derive(Debug)]
struct Entry<D> {
    desired: D,
    priority: usize,
    seq: i64,
}

#[derive(Debug)]
struct Inner<K, D> {
    order: BTreeSet<(usize, i64, K)>,
    pending: HashMap<K, Entry<D>>,
    /// Desired states taken by the write loop and not yet answered (the newest, when a newer one
    /// waits for the write in flight).
    in_flight: HashMap<K, D>,
    next_seq: i64,
    next_front: i64,
}

impl<K, D> Default for Inner<K, D> {
    fn default() -> Self {
        Inner {
            order: BTreeSet::new(),
            pending: HashMap::new(),
            in_flight: HashMap::new(),
            next_seq: 0,
            next_front: -1,
        }
    }
}

/// Pending desired states by object, in priority order.
#[derive(Debug)]
pub struct WriteQueue<K, D> {
    inner: Mutex<Inner<K, D>>,
    notify: Notify,
}

impl<K, D> Default for WriteQueue<K, D> {
    fn default() -> Self {
        WriteQueue {
            inner: Mutex::new(Inner::default()),
            notify: Notify::new(),
        }
    }
}

impl<K: Clone + Eq + Hash + Ord, D: Clone> WriteQueue<K, D> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K, D>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(q: &mut Inner<K, D>, key: K, desired: D, priority: usize, seq: i64) {
        if let Some(old) = q.pending.remove(&key) {
            q.order.remove(&(old.priority, old.seq, key.clone()));
        }
        q.order.insert((priority, seq, key.clone()));
        q.pending.insert(
            key,
            Entry {
                desired,
                priority,
                seq,
            },
        );
    }

    /// Queues `desired` for `key` at `priority` (lower goes first), replacing a pending one,
    /// which keeps its place in line within the new priority.
    pub fn push(&self, key: K, desired: D, priority: usize) {
        {
            let mut q = self.lock();
            let seq = match q.pending.get(&key) {
                Some(e) => e.seq,
                None => {
                    q.next_seq += 1;
                    q.next_seq
                }
            };
            Self::insert(&mut q, key, desired, priority, seq);
        }
        self.notify.notify_one();
    }

    /// Queues `desired` again after a failed attempt, ahead of its priority's line, unless a
    /// newer desired state for the object arrived meanwhile.
    pub fn retry(&self, key: K, desired: D, priority: usize) {
        let queued = {
            let mut q = self.lock();
            if q.pending.contains_key(&key) {
                false
            } else {
                q.next_front -= 1;
                let seq = q.next_front;
                Self::insert(&mut q, key, desired, priority, seq);
                true
            }
        };
        if queued {
            self.notify.notify_one();
        }
    }

    /// Takes the next item.
    pub fn pop(&self) -> Option<(K, D, usize)> {
        let mut q = self.lock();
        let (priority, _, key) = q.order.pop_first()?;
        let entry = q.pending.remove(&key)?;
        Some((key, entry.desired, priority))
    }

    /// Waits for and takes the next item.
    pub async fn next(&self) -> (K, D, usize) {
        loop {
            if let Some(item) = self.pop() {
                return item;
            }
            self.notify.notified().await;
        }
    }

    /// The desired state not yet stored for `key`, if any: queued, or taken by the write loop
    /// and not yet answered (so a cycle does not confirm again what is being written).
    pub fn pending(&self, key: &K) -> Option<D> {
        let q = self.lock();
        q.pending
            .get(key)
            .map(|e| e.desired.clone())
            .or_else(|| q.in_flight.get(key).cloned())
    }

    /// Notes that the write loop holds `desired` for `key` until [`WriteQueue::answered`].
    fn taken(&self, key: K, desired: D) {
        self.lock().in_flight.insert(key, desired);
    }

    /// Whether the write loop holds a write for `key` that is not yet answered.
    fn is_taken(&self, key: &K) -> bool {
        self.lock().in_flight.contains_key(key)
    }

    /// The write for `key` was answered (stored, refused, or to be retried through the queue).
    fn answered(&self, key: &K) {
        self.lock().in_flight.remove(key);
    }

    /// Drops everything (leadership lost: another replica writes now).
    pub fn clear(&self) {
        let mut q = self.lock();
        // Writes in flight go on until answered: they stay taken, so none is started twice.
        let in_flight = std::mem::take(&mut q.in_flight);
        *q = Inner::default();
        q.in_flight = in_flight;
    }

    /// Number of objects with a pending write.
    pub fn len(&self) -> usize {
        self.lock().pending.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether nothing is pending and no write taken from the queue is unanswered.
    pub fn is_idle(&self) -> bool {
        let q = self.lock();
        q.pending.is_empty() && q.in_flight.is_empty()
    }
}

/// A [`Target`] whose writes go through a [`WriteQueue`]: it can read its cache, and turn a
/// desired state into the value to store at write time (so `lastTransitionTime` is decided
/// against what is stored then, including our own writes the cache has not shown yet).
pub trait QueuedTarget: Target {
    /// What the probe cycles want (a driver's report).
    type Desired: Clone + Send + Sync + 'static;
    /// The object as cached now; `None` when it is gone.
    fn cached(&self, key: &Self::Key) -> Option<Stored<Self::Value>>;
    /// The value to store over `before` for `desired`; `None` when nothing would change.
    fn reconcile(&self, before: &Self::Value, desired: &Self::Desired) -> Option<Self::Value>;
    /// Hears how a write for `desired` ended (after the writer has counted and logged it), for
    /// what only the component can do about it, such as stopping on a refusal that means its
    /// credentials are for another node. Nothing by default.
    fn answered(
        &self,
        _key: &Self::Key,
        _desired: &Self::Desired,
        _outcome: &Outcome<Self::Value>,
    ) {
    }
}

/// Most status writes a [`WriteLoop`] has in flight at once (as upstream's sidecar runs its
/// writes on worker goroutines): a correlated failure reaches status at this many times the
/// API server's latency, while the rate limit still paces the whole.
pub const MAX_WRITES_IN_FLIGHT: usize = 16;

/// The writer draining a queue: up to `max_in_flight` writes at once, never two for one object
/// (a newer desired state for an object being written waits for that write to finish, then is
/// reconciled against what it stored).
pub struct WriteLoop<T: QueuedTarget> {
    /// The write path.
    pub writer: Arc<StatusWriter<T>>,
    /// The queue the cycles fill.
    pub queue: Arc<WriteQueue<T::Key, T::Desired>>,
    /// `--kube-api-qps` / `--kube-api-burst` for status writes.
    pub limiter: RateLimiter,
    /// Whether this replica leads (always true without leader election, see [`WriteLoop::new`]).
    pub leader: watch::Receiver<bool>,
    /// Most writes in flight at once ([`MAX_WRITES_IN_FLIGHT`] by default; at least 1).
    pub max_in_flight: usize,
}

/// One finished write: what it was for, and how it ended.
struct Done<T: QueuedTarget> {
    key: T::Key,
    desired: T::Desired,
    priority: usize,
    outcome: Outcome<T::Value>,
}

impl<T: QueuedTarget> WriteLoop<T>
where
    T::Key: Ord,
{
    /// A loop for a component without leader election (it always writes), with up to
    /// [`MAX_WRITES_IN_FLIGHT`] writes at once.
    pub fn new(
        writer: Arc<StatusWriter<T>>,
        queue: Arc<WriteQueue<T::Key, T::Desired>>,
        limiter: RateLimiter,
    ) -> Self {
        // The sender is dropped at once: the receiver keeps reading `true`.
        let (_, leader) = watch::channel(true);
        WriteLoop {
            writer,
            queue,
            limiter,
            leader,
            max_in_flight: MAX_WRITES_IN_FLIGHT,
        }
    }

    /// Writes until `shutdown` completes; writes still in flight then are abandoned (the next
    /// leader, or the next start, reconciles from what is stored).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let max = self.max_in_flight.max(1);
        let mut in_flight = FuturesUnordered::new();
        // The newest desired state of an object whose write is in flight.
        let mut parked: HashMap<T::Key, (T::Desired, usize)> = HashMap::new();
        loop {
            if in_flight.is_empty()
                && let Some(until) = self.writer.unreachable_until()
            {
                tokio::select! {
                    _ = &mut shutdown => return,
                    _ = tokio::time::sleep_until(until) => {}
                }
            }
            let (key, desired, priority) = tokio::select! {
                _ = &mut shutdown => return,
                Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                    self.finished(done, &mut parked);
                    continue;
                }
                // While the API server is unreachable, no new write starts before the ones in
                // flight have answered (and the backoff has passed).
                item = self.queue.next(), if in_flight.len() < max
                    && (in_flight.is_empty() || self.writer.unreachable_until().is_none()) => item,
            };
            if !*self.leader.borrow() {
                continue;
            }
            if self.queue.is_taken(&key) {
                self.queue.taken(key.clone(), desired.clone());
                parked.insert(key, (desired, priority));
                continue;
            }
            let target = self.writer.target();
            let Some(stored) = target.cached(&key) else {
                tracing::debug!(object = %key, "the object is gone; nothing to write");
                continue;
            };
            let before = self.writer.effective(&key, &stored);
            // No-ops and held objects cost no rate-limit token.
            let Some(after) = target.reconcile(&before, &desired) else {
                continue;
            };
            if !self.writer.may_write(&key) {
                if self.writer.unreachable_until().is_some() {
                    self.queue.retry(key, desired, priority);
                }
                continue;
            }
            tokio::select! {
                _ = &mut shutdown => return,
                _ = self.limiter.acquire() => {}
            }
            // Checked again right before the write: a replica that lost the lease stops at once.
            if !*self.leader.borrow() {
                continue;
            }
            self.queue.taken(key.clone(), desired.clone());
            let writer = self.writer.clone();
            in_flight.push(async move {
                let outcome = writer.write(&key, &stored, &before, after).await;
                Done::<T> {
                    key,
                    desired,
                    priority,
                    outcome,
                }
            });
        }
    }

    /// Handles a finished write: a failed one is tried again, unless a newer desired state
    /// arrived while it was in flight, which goes next instead.
    fn finished(&self, done: Done<T>, parked: &mut HashMap<T::Key, (T::Desired, usize)>) {
        self.queue.answered(&done.key);
        self.writer
            .target()
            .answered(&done.key, &done.desired, &done.outcome);
        if let Some((desired, priority)) = parked.remove(&done.key) {
            self.queue.retry(done.key, desired, priority);
            return;
        }
        match done.outcome {
            Outcome::Unavailable | Outcome::Conflict => {
                self.queue.retry(done.key, done.desired, done.priority)
            }
            Outcome::Written(_)
            | Outcome::Held
            | Outcome::Dropped
            | Outcome::Refused(_)
            | Outcome::Forbidden(_)
            | Outcome::Gone => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_orders_by_severity_and_retries_never_override() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        q.push("a", "a1", 2);
        q.push("b", "b1", 2);
        q.push("a", "a2", 2);
        q.push("c", "c1", 0);
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop(), Some(("c", "c1", 0)), "most severe first");
        assert_eq!(
            q.pop(),
            Some(("a", "a2", 2)),
            "latest wins, keeps its place"
        );
        q.push("b", "b2", 2);
        q.retry("b", "stale", 2);
        q.retry("d", "d0", 2);
        assert_eq!(
            q.pop(),
            Some(("d", "d0", 2)),
            "a retry goes ahead of its line"
        );
        assert_eq!(q.pop(), Some(("b", "b2", 2)));
        assert!(q.is_empty());
        q.push("e", "e", 1);
        q.clear();
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn a_write_in_flight_is_still_pending_until_answered() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        q.push("a", "clear", 3);
        let (key, desired, _) = q.pop().unwrap();
        assert_eq!(q.pending(&"a"), None, "taken, but not yet marked");
        q.taken(key, desired);
        assert_eq!(
            q.pending(&"a"),
            Some("clear"),
            "in flight counts as pending"
        );
        q.push("a", "newer", 1);
        assert_eq!(
            q.pending(&"a"),
            Some("newer"),
            "a queued newer state comes first"
        );
        assert_eq!(q.pop().map(|(_, d, _)| d), Some("newer"));
        q.answered(&"a");
        assert_eq!(q.pending(&"a"), None);
    }

    #[test]
    fn clearing_drops_queued_work_but_not_the_writes_in_flight() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        q.taken("a", "in flight");
        q.push("b", "queued", 2);
        q.clear();
        assert_eq!(q.pop(), None, "queued work is dropped");
        assert!(
            q.is_taken(&"a"),
            "a write in flight is still held, so none starts twice"
        );
        q.answered(&"a");
        assert!(!q.is_taken(&"a"));
    }

    #[test]
    fn idle_only_when_nothing_is_queued_or_in_flight() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        assert!(q.is_idle());
        q.push("a", "x", 0);
        assert!(!q.is_idle(), "queued");
        let (key, desired, _) = q.pop().unwrap();
        q.taken(key, desired);
        assert!(q.is_empty() && !q.is_idle(), "in flight");
        q.answered(&"a");
        assert!(q.is_idle());
    }
}
