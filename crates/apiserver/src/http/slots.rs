//! Connection slots: at most `max` connections are served at once, and when all are taken the
//! oldest connection that has not yet sent a complete first request is shed to make room for a
//! new one. Without shedding, a client that opens connections and sends nothing (or half a
//! request head, or no TLS ClientHello) fills every slot, and everyone else waits in the listen
//! backlog until the idle ones time out.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, oneshot};

/// Connections that may be open beyond the cap while the ones shed for them close: each shed
/// connection still holds its descriptor until its task notices, which is at once, but the
/// accept loop does not wait for that.
pub(crate) const SHED_RESERVE: usize = 16;

#[derive(Default)]
struct Table {
    /// Connections holding a slot (shed ones until their task ends).
    open: usize,
    /// Connections without a complete first request yet, oldest first, with the sender that
    /// tells each to close.
    waiting: VecDeque<(u64, oneshot::Sender<()>)>,
    next_id: u64,
}

/// The slots of one listener.
pub(crate) struct Slots {
    max: usize,
    table: Mutex<Table>,
    changed: Notify,
}

/// One connection's slot; dropping it frees the slot.
pub(crate) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    started: AtomicBool,
}

impl Slots {
    /// Slots for at most `max` connections (at least one).
    pub(crate) fn new(max: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max: max.max(1),
            table: Mutex::new(Table::default()),
            changed: Notify::new(),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // A panic while holding the lock leaves plain counters behind, still usable.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn has_room(&self, t: &Table) -> bool {
        t.open < self.max || (!t.waiting.is_empty() && t.open < self.max + SHED_RESERVE)
    }

    /// Completes when a new connection may get a slot: one is free, or one can be made free by
    /// shedding a connection that has not sent its first request. Only a hint: by the time a
    /// connection is accepted the room may be gone, so [`Slots::try_take`] decides.
    pub(crate) async fn room(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.has_room(&self.table()) {
                return;
            }
            changed.await;
        }
    }

    /// Takes a slot for a just-accepted connection, shedding the oldest connection without a
    /// first request when all slots are taken; None when there is no room (wait for
    /// [`Slots::room`] and try again). The receiver completes when this connection is shed in
    /// turn.
    pub(crate) fn try_take(self: &Arc<Self>) -> Option<(Slot, oneshot::Receiver<()>)> {
        let mut t = self.table();
        if !self.has_room(&t) {
            return None;
        }
        if t.open >= self.max
            && let Some((_, shed)) = t.waiting.pop_front()
        {
            // Its task drops the connection and then the slot; a closed receiver means it
            // ended already.
            let _ = shed.send(());
        }
        let (tx, rx) = oneshot::channel();
        t.open += 1;
        let id = t.next_id;
        t.next_id += 1;
        t.waiting.push_back((id, tx));
        drop(t);
        let slot = Slot {
            slots: self.clone(),
            id,
            started: AtomicBool::new(false),
        };
        Some((slot, rx))
    }

    /// Completes once every slot is free.
    pub(crate) async fn all_free(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.table().open == 0 {
                return;
            }
            changed.await;
        }
    }

    fn forget_waiting(&self, id: u64) {
        let mut t = self.table();
        if let Some(i) = t.waiting.iter().position(|(w, _)| *w == id) {
            t.waiting.remove(i);
        }
    }
}

impl Slot {
    /// Marks the connection as having sent a complete request: it is no longer shed.
    pub(crate) fn started(&self) {
        if !self.started.swap(true, Ordering::AcqRel) {
            self.slots.forget_waiting(self.id);
            self.slots.changed.notify_waiters();
        }
    }

    /// Whether the connection has sent a complete request.
    pub(crate) fn has_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        {
            let mut t = self.slots.table();
            if let Some(i) = t.waiting.iter().position(|(w, _)| *w == self.id) {
                t.waiting.remove(i);
            }
            t.open = t.open.saturating_sub(1);
        }
        self.slots.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_table_sheds_the_oldest_connection_without_a_request() {
        let slots = Slots::new(2);
        let (first, mut first_shed) = slots.try_take().unwrap();
        let (second, mut second_shed) = slots.try_take().unwrap();
        second.started();
        // Full, but the first has sent nothing: room by shedding it.
        tokio::time::timeout(std::time::Duration::from_secs(5), slots.room())
            .await
            .expect("room while a connection without a request can be shed");
        let (third, _third_shed) = slots.try_take().unwrap();
        assert_eq!(first_shed.try_recv(), Ok(()), "the oldest idle one is shed");
        assert!(
            second_shed.try_recv().is_err(),
            "a connection that sent a request is never shed"
        );
        drop(first);
        third.started();
        // Full of connections that sent requests: no room until one closes.
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), slots.room());
        assert!(waiting.await.is_err(), "no room when nothing can be shed");
        assert!(slots.try_take().is_none(), "and no slot");
        drop(second);
        slots.room().await;
        drop(third);
        slots.all_free().await;
    }
}
