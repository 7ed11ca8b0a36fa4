//! The keyed coalescing queue between probe cycles and the write loop ([`crate::offer`]).
//! Several pending updates for one object collapse into the latest; the most severe go first
//! (Inaccessible, DataLoss, Degraded, then recoveries), first come first within a severity.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::Notify;

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

/// An item the write loop took from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Taken<K, D> {
    /// The object.
    pub key: K,
    /// Its desired state.
    pub desired: D,
    /// Its place in line (lower goes first).
    pub priority: usize,
    /// A write for the object was already in flight: this state waits for it to be answered.
    pub behind: bool,
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

    /// Queues `desired` ahead of its priority's line unless `key` has a pending state.
    fn requeue(q: &mut Inner<K, D>, key: K, desired: D, priority: usize) -> bool {
        if q.pending.contains_key(&key) {
            return false;
        }
        q.next_front -= 1;
        let seq = q.next_front;
        Self::insert(q, key, desired, priority, seq);
        true
    }

    /// Takes the next item for writing. From this moment until [`WriteQueue::answered`] it
    /// counts as pending (a probe cycle must never see an object between "queued" and "being
    /// written" as having nothing on its way). When a write for the same object is still in
    /// flight, the item is the newest state behind it: [`Taken::behind`] says so.
    pub(crate) fn pop(&self) -> Option<Taken<K, D>> {
        let mut q = self.lock();
        let (priority, _, key) = q.order.pop_first()?;
        let entry = q.pending.remove(&key)?;
        let behind = q
            .in_flight
            .insert(key.clone(), entry.desired.clone())
            .is_some();
        Some(Taken {
            key,
            desired: entry.desired,
            priority,
            behind,
        })
    }

    /// Waits for and takes the next item (as [`WriteQueue::pop`]).
    pub(crate) async fn next(&self) -> Taken<K, D> {
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

    /// Whether a desired state for `key` is queued or being written, without copying it.
    pub fn has_pending(&self, key: &K) -> bool {
        let q = self.lock();
        q.pending.contains_key(key) || q.in_flight.contains_key(key)
    }

    /// Whether the write loop holds a write for `key` that is not yet answered.
    #[cfg(test)]
    fn is_taken(&self, key: &K) -> bool {
        self.lock().in_flight.contains_key(key)
    }

    /// The write taken for `key` was answered, or none was started for it. `again`: the
    /// state to write next (a failed attempt, or the newer state that waited behind it), queued
    /// ahead of its priority's line unless a newer state for the object arrived meanwhile,
    /// in the same step as the answer, so the object never looks as though
    /// nothing were on its way.
    pub(crate) fn answered(&self, key: &K, again: Option<(D, usize)>) {
        let queued = {
            let mut q = self.lock();
            q.in_flight.remove(key);
            match again {
                Some((desired, priority)) => Self::requeue(&mut q, key.clone(), desired, priority),
                None => false,
            }
        };
        if queued {
            self.notify.notify_one();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops the next item, asserting that no write for it was in flight.
    fn pop_free<'a>(q: &WriteQueue<&'a str, &'a str>) -> Option<(&'a str, &'a str, usize)> {
        q.pop().map(|t| {
            assert!(!t.behind, "{} was not being written", t.key);
            (t.key, t.desired, t.priority)
        })
    }

    #[test]
    fn coalesces_orders_by_severity_and_retries_never_override() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        q.push("a", "a1", 2);
        q.push("b", "b1", 2);
        q.push("a", "a2", 2);
        q.push("c", "c1", 0);
        assert_eq!(q.len(), 3);
        assert_eq!(pop_free(&q), Some(("c", "c1", 0)), "most severe first");
        assert_eq!(
            pop_free(&q),
            Some(("a", "a2", 2)),
            "latest wins, keeps its place"
        );
        q.push("b", "b2", 2);
        q.answered(&"b", Some(("stale", 2)));
        q.answered(&"d", Some(("d0", 2)));
        assert_eq!(
            pop_free(&q),
            Some(("d", "d0", 2)),
            "a retry goes ahead of its line"
        );
        assert_eq!(pop_free(&q), Some(("b", "b2", 2)));
        assert!(q.is_empty());
        q.push("e", "e", 1);
        q.clear();
        assert_eq!(pop_free(&q), None);
    }

    #[test]
    fn a_write_in_flight_is_still_pending_until_answered() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        q.push("a", "clear", 3);
        let taken = q.pop().unwrap();
        assert_eq!(
            (taken.key, taken.desired, taken.behind),
            ("a", "clear", false)
        );
        assert_eq!(
            q.pending(&"a"),
            Some("clear"),
            "taken is in flight at once, and in flight counts as pending"
        );
        q.push("a", "newer", 1);
        assert_eq!(
            q.pending(&"a"),
            Some("newer"),
            "a queued newer state comes first"
        );
        let behind = q.pop().unwrap();
        assert_eq!((behind.desired, behind.behind), ("newer", true));
        assert_eq!(q.pending(&"a"), Some("newer"), "the newest in flight");
        q.answered(&"a", None);
        assert_eq!(q.pending(&"a"), None);
    }

    #[test]
    fn an_answer_that_queues_again_leaves_no_moment_without_a_pending_state() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        q.push("a", "degraded", 2);
        q.pop().unwrap();
        q.answered(&"a", Some(("degraded", 2)));
        assert!(q.has_pending(&"a") && !q.is_taken(&"a"), "queued again");
        q.pop().unwrap();
        q.push("a", "newer", 1);
        q.answered(&"a", Some(("degraded", 2)));
        assert_eq!(
            pop_free(&q),
            Some(("a", "newer", 1)),
            "a newer state is not overridden by the answered one"
        );
    }

    #[test]
    fn clearing_drops_queued_work_but_not_the_writes_in_flight() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        q.push("a", "in flight", 2);
        q.pop().unwrap();
        q.push("b", "queued", 2);
        q.clear();
        assert_eq!(pop_free(&q), None, "queued work is dropped");
        assert!(
            q.is_taken(&"a"),
            "a write in flight is still held, so none starts twice"
        );
        q.answered(&"a", None);
        assert!(!q.is_taken(&"a"));
    }

    #[test]
    fn has_pending_agrees_with_pending_queued_and_in_flight() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        assert!(!q.has_pending(&"a"));
        q.push("a", "x", 0);
        assert!(q.has_pending(&"a") && q.pending(&"a").is_some(), "queued");
        q.pop().unwrap();
        assert!(
            q.has_pending(&"a") && q.pending(&"a").is_some(),
            "in flight"
        );
        q.answered(&"a", None);
        assert!(!q.has_pending(&"a") && q.pending(&"a").is_none());
    }

    #[test]
    fn idle_only_when_nothing_is_queued_or_in_flight() {
        let q: WriteQueue<&str, &str> = WriteQueue::new();
        assert!(q.is_idle());
        q.push("a", "x", 0);
        assert!(!q.is_idle(), "queued");
        q.pop().unwrap();
        assert!(q.is_empty() && !q.is_idle(), "in flight");
        q.answered(&"a", None);
        assert!(q.is_idle());
    }
}
