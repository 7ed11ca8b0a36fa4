//! The keyed coalescing queue between the probe cycles and the single writer: several pending
//! updates for one claim collapse into the latest, so only that one is written.

use crate::claims::ClaimKey;
use crate::status_writer::ClaimEvent;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::Notify;
use volhealth_model::VolumeHealthStatus;

/// Most Events kept waiting; older ones are dropped first (Events are advisory).
const MAX_PENDING_EVENTS: usize = 1024;

/// The status one claim should have.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingWrite {
    /// The claim.
    pub key: ClaimKey,
    /// The volume it is bound to (for logs).
    pub volume_id: String,
    /// The desired `status.healthStatus`; None removes it.
    pub desired: Option<VolumeHealthStatus>,
}

/// One unit of work for the writer.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteItem {
    /// Patch a claim's status.
    Status(PendingWrite),
    /// Create an Event.
    Event(ClaimEvent),
}

#[derive(Debug, Default)]
struct Inner {
    order: VecDeque<ClaimKey>,
    pending: HashMap<ClaimKey, PendingWrite>,
    events: VecDeque<ClaimEvent>,
}

/// FIFO of claims with their latest desired status, plus Events.
#[derive(Debug, Default)]
pub struct WriteQueue {
    inner: Mutex<Inner>,
    notify: Notify,
}

impl WriteQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> Option<T> {
        self.inner.lock().ok().map(|mut g| f(&mut g))
    }

    /// Queues `w`, replacing a pending write of the same claim (which keeps its place in line).
    pub fn push(&self, w: PendingWrite) {
        self.with(|q| {
            if !q.pending.contains_key(&w.key) {
                q.order.push_back(w.key.clone());
            }
            q.pending.insert(w.key.clone(), w);
        });
        self.notify.notify_one();
    }

    /// Queues `w` again after a failed attempt, unless a newer write for the claim arrived meanwhile.
    pub fn retry(&self, w: PendingWrite) {
        let queued = self
            .with(|q| {
                if q.pending.contains_key(&w.key) {
                    return false;
                }
                q.order.push_front(w.key.clone());
                q.pending.insert(w.key.clone(), w);
                true
            })
            .unwrap_or(false);
        if queued {
            self.notify.notify_one();
        }
    }

    /// Queues an Event.
    pub fn push_event(&self, e: ClaimEvent) {
        self.with(|q| {
            if q.events.len() >= MAX_PENDING_EVENTS {
                q.events.pop_front();
            }
            q.events.push_back(e);
        });
        self.notify.notify_one();
    }

    /// Takes the next item: status writes first (they are the durable state), then Events.
    pub fn pop(&self) -> Option<WriteItem> {
        self.with(|q| {
            while let Some(key) = q.order.pop_front() {
                if let Some(w) = q.pending.remove(&key) {
                    return Some(WriteItem::Status(w));
                }
            }
            q.events.pop_front().map(WriteItem::Event)
        })
        .flatten()
    }

    /// Waits for and takes the next item.
    pub async fn next(&self) -> WriteItem {
        loop {
            if let Some(item) = self.pop() {
                return item;
            }
            self.notify.notified().await;
        }
    }

    /// The desired status pending for a claim, if any.
    pub fn pending(&self, key: &ClaimKey) -> Option<PendingWrite> {
        self.with(|q| q.pending.get(key).cloned()).flatten()
    }

    /// Drops everything (leadership lost: another replica writes now).
    pub fn clear(&self) {
        self.with(|q| *q = Inner::default());
    }

    /// Number of pending status writes.
    pub fn len(&self) -> usize {
        self.with(|q| q.pending.len()).unwrap_or(0)
    }

    /// Whether no status write is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(name: &str, reason: &str) -> PendingWrite {
        PendingWrite {
            key: ClaimKey {
                namespace: "ns".into(),
                name: name.into(),
            },
            volume_id: format!("vol-{name}"),
            desired: Some(VolumeHealthStatus {
                health_conditions: Some(vec![volhealth_model::VolumeHealthCondition {
                    status: "Degraded".into(),
                    reason: reason.into(),
                    message: None,
                }]),
                last_transition_time: None,
            }),
        }
    }

    #[test]
    fn several_updates_for_one_claim_collapse_into_the_latest() {
        let q = WriteQueue::new();
        q.push(w("a", "First"));
        q.push(w("b", "Other"));
        q.push(w("a", "Second"));
        q.push(w("a", "Third"));
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(), Some(WriteItem::Status(w("a", "Third"))));
        assert_eq!(q.pop(), Some(WriteItem::Status(w("b", "Other"))));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn a_retry_never_overrides_a_newer_write() {
        let q = WriteQueue::new();
        q.push(w("a", "Newer"));
        q.retry(w("a", "Older"));
        assert_eq!(q.pop(), Some(WriteItem::Status(w("a", "Newer"))));
        q.retry(w("a", "Older"));
        assert_eq!(q.pop(), Some(WriteItem::Status(w("a", "Older"))));
    }

    #[test]
    fn status_writes_go_before_events_and_clear_empties_all() {
        let q = WriteQueue::new();
        let e = ClaimEvent {
            key: ClaimKey {
                namespace: "ns".into(),
                name: "a".into(),
            },
            uid: "u".into(),
            event_type: crate::status_writer::EventType::Normal,
            reason: "VolumeHealthRecovered",
            message: "m".into(),
        };
        q.push_event(e.clone());
        q.push(w("a", "X"));
        assert!(matches!(q.pop(), Some(WriteItem::Status(_))));
        assert_eq!(q.pop(), Some(WriteItem::Event(e.clone())));
        q.push_event(e);
        q.push(w("b", "Y"));
        q.clear();
        assert_eq!(q.pop(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn next_wakes_up_on_push() {
        let q = std::sync::Arc::new(WriteQueue::new());
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { q2.next().await });
        tokio::task::yield_now().await;
        q.push(w("a", "X"));
        assert_eq!(waiter.await.unwrap(), WriteItem::Status(w("a", "X")));
    }
}
