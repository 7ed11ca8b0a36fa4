//! A watcher's backlog: events encoded but not yet taken by the connection. It is bounded in
//! events and in bytes; a watcher whose client does not make room within the patience is slow,
//! and is terminated as kube-apiserver terminates watchers that cannot keep up: what it still
//! held is dropped at once (so its memory returns even while the client holds the connection
//! open without reading), and its stream ends after one last line (a 410 ERROR event, so that
//! the client lists again).

use axum::body::{Body, Bytes};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// Most events one watcher may hold unread by default.
pub const WATCH_QUEUE_EVENTS: usize = 1024;
/// Most bytes of encoded events one watcher may hold unread by default (one larger event is let
/// through when nothing else is held). With the kernel's socket buffers in front of it, a
/// client that reads at all never comes near it; one that does not read costs at most this.
pub const WATCH_QUEUE_BYTES: usize = 1024 * 1024;

/// How much a watcher may hold unread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Bytes of encoded events held for one watcher at most.
    pub bytes: usize,
    /// Events held for one watcher at most.
    pub events: usize,
    /// How long a full backlog may stay full before the watcher is terminated.
    pub patience: Duration,
}

#[derive(Default)]
struct Queue {
    lines: VecDeque<Bytes>,
    bytes: usize,
    /// The watch ended: the stream ends once `lines` is empty.
    finished: bool,
    /// The response body was dropped (the client or the connection went away).
    reader_gone: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the body when a line is queued or the watch ends.
    readable: Notify,
    /// Wakes the watch task when a line is taken or the body is dropped.
    drained: Notify,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Nothing in the queue is left half-changed by a panic: keep using it.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The sending side, held by the watch task; dropping it ends the stream.
pub(crate) struct Backlog {
    shared: Arc<Shared>,
    limits: Limits,
}

/// What became of an event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Queued for the client.
    Queued,
    /// The client is gone.
    Closed,
    /// The client did not make room in time; the watcher must end.
    TooSlow,
}

/// Marks the reader gone when the response body is dropped, freeing what was queued.
struct Reader(Arc<Shared>);

impl Drop for Reader {
    fn drop(&mut self) {
        {
            let mut q = self.0.queue();
            q.reader_gone = true;
            q.lines.clear();
            q.bytes = 0;
        }
        self.0.drained.notify_waiters();
    }
}

/// A backlog and the response body that drains it.
pub(crate) fn channel(limits: Limits) -> (Backlog, Body) {
    let shared = Arc::new(Shared::default());
    let reader = Reader(shared.clone());
    let stream = futures::stream::unfold(reader, |reader| async move {
        let shared = reader.0.clone();
        loop {
            let readable = shared.readable.notified();
            tokio::pin!(readable);
            readable.as_mut().enable();
            {
                let mut q = shared.queue();
                if let Some(line) = q.lines.pop_front() {
                    q.bytes = q.bytes.saturating_sub(line.len());
                    drop(q);
                    shared.drained.notify_waiters();
                    return Some((Ok::<_, std::convert::Infallible>(line), reader));
                }
                if q.finished {
                    return None;
                }
            }
            readable.await;
        }
    });
    (Backlog { shared, limits }, Body::from_stream(stream))
}

impl Backlog {
    /// Queues `line`, waiting up to the patience for room.
    pub(crate) async fn send(&self, line: Bytes) -> Sent {
        let deadline = tokio::time::Instant::now() + self.limits.patience;
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            {
                let mut q = self.shared.queue();
                if q.reader_gone {
                    return Sent::Closed;
                }
                let fits =
                    q.lines.len() < self.limits.events && q.bytes + line.len() <= self.limits.bytes;
                if q.lines.is_empty() || fits {
                    q.bytes += line.len();
                    q.lines.push_back(line);
                    drop(q);
                    self.shared.readable.notify_waiters();
                    return Sent::Queued;
                }
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                return Sent::TooSlow;
            }
        }
    }

    /// Ends a slow watcher: drops everything it held and leaves only `line` (the ERROR that
    /// tells the client to list again) before the end of the stream.
    pub(crate) fn terminate(&self, line: Bytes) {
        {
            let mut q = self.shared.queue();
            q.lines.clear();
            q.bytes = line.len();
            q.lines.push_back(line);
            q.finished = true;
        }
        self.shared.readable.notify_waiters();
    }

    /// What is held unread: (events, bytes).
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let q = self.shared.queue();
        (q.lines.len(), q.bytes)
    }

    /// Completes when the client has gone.
    pub(crate) async fn closed(&self) {
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.shared.queue().reader_gone {
                return;
            }
            drained.await;
        }
    }
}

impl Drop for Backlog {
    fn drop(&mut self) {
        self.shared.queue().finished = true;
        self.shared.readable.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn limits(bytes: usize, events: usize) -> Limits {
        Limits {
            bytes,
            events,
            patience: Duration::from_secs(5),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_backlog_waits_then_gives_up() {
        let (b, body) = channel(limits(10, 100));
        assert_eq!(
            b.send(Bytes::from_static(b"0123456789")).await,
            Sent::Queued
        );
        // Nobody reads: the next event waits out the patience.
        assert_eq!(b.send(Bytes::from_static(b"x")).await, Sent::TooSlow);
        // Reading makes room.
        let mut body = body.into_data_stream();
        let first = body.next().await.expect("a chunk").expect("data");
        assert_eq!(&first[..], b"0123456789");
        assert_eq!(b.send(Bytes::from_static(b"abc")).await, Sent::Queued);
        drop(body);
        assert_eq!(
            b.send(Bytes::from_static(b"0123456789")).await,
            Sent::Closed
        );
        b.closed().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_event_count_is_bounded_too() {
        let (b, _body) = channel(limits(1 << 20, 3));
        for _ in 0..3 {
            assert_eq!(b.send(Bytes::from_static(b"e")).await, Sent::Queued);
        }
        assert_eq!(b.send(Bytes::from_static(b"e")).await, Sent::TooSlow);
        assert_eq!(b.held(), (3, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn terminating_frees_what_was_held_and_ends_after_the_last_line() {
        let (b, body) = channel(limits(1 << 20, 1000));
        for _ in 0..100 {
            assert_eq!(b.send(Bytes::from(vec![b'x'; 1000])).await, Sent::Queued);
        }
        assert_eq!(b.held(), (100, 100_000));
        b.terminate(Bytes::from_static(b"last\n"));
        assert_eq!(b.held(), (1, 5), "only the last line is kept");
        drop(b);
        let chunks: Vec<_> = body.into_data_stream().collect().await;
        assert_eq!(chunks.len(), 1);
        assert_eq!(&chunks[0].as_ref().expect("data")[..], b"last\n");
    }

    #[tokio::test(start_paused = true)]
    async fn one_event_larger_than_the_limit_passes_an_empty_backlog() {
        let (b, body) = channel(limits(4, 100));
        assert_eq!(
            b.send(Bytes::from_static(b"much too long")).await,
            Sent::Queued
        );
        drop(b);
        let chunks: Vec<_> = body.into_data_stream().collect().await;
        assert_eq!(chunks.len(), 1);
    }
}
