//! A watcher's backlog: events encoded but not yet taken by the connection. It is bounded in
//! bytes; a watcher whose client does not drain it within the patience is slow, and is closed
//! with a 410 ERROR event so that the client lists again, as kube-apiserver drops watchers
//! that cannot keep up.

use axum::body::{Body, Bytes};
use futures::StreamExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

/// How much a watcher may hold unread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Bytes of encoded events held for one watcher at most (one larger event is let through
    /// when nothing else is held).
    pub bytes: usize,
    /// How long a full backlog may stay full before the watcher is closed.
    pub patience: Duration,
}

/// Room for events in messages; the bytes are the real bound, this is never the one reached.
const MESSAGES: usize = 64 * 1024;

struct Shared {
    queued: AtomicUsize,
    drained: Notify,
}

/// The sending side, held by the watch task.
pub(crate) struct Backlog {
    tx: mpsc::Sender<Bytes>,
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
    /// The client did not drain the backlog in time; the watcher must end.
    TooSlow,
}

/// A backlog and the response body that drains it.
pub(crate) fn channel(limits: Limits) -> (Backlog, Body) {
    let (tx, rx) = mpsc::channel::<Bytes>(MESSAGES);
    let shared = Arc::new(Shared {
        queued: AtomicUsize::new(0),
        drained: Notify::new(),
    });
    let drain = shared.clone();
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx).map(move |chunk: Bytes| {
        drain.queued.fetch_sub(chunk.len(), Ordering::AcqRel);
        drain.drained.notify_waiters();
        Ok::<_, std::convert::Infallible>(chunk)
    });
    (Backlog { tx, shared, limits }, Body::from_stream(stream))
}

impl Backlog {
    /// Queues `line`, waiting up to the patience for room.
    pub(crate) async fn send(&self, line: Bytes) -> Sent {
        let n = line.len();
        let deadline = tokio::time::Instant::now() + self.limits.patience;
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            let queued = self.shared.queued.load(Ordering::Acquire);
            if queued == 0 || queued + n <= self.limits.bytes {
                break;
            }
            if self.tx.is_closed() {
                return Sent::Closed;
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                return Sent::TooSlow;
            }
        }
        self.shared.queued.fetch_add(n, Ordering::AcqRel);
        match tokio::time::timeout_at(deadline, self.tx.send(line)).await {
            Ok(Ok(())) => Sent::Queued,
            Ok(Err(_)) => Sent::Closed,
            Err(_) => Sent::TooSlow,
        }
    }

    /// Queues a last line whatever the backlog holds (the ERROR that ends a slow watcher).
    pub(crate) fn send_last(&self, line: Bytes) {
        self.shared.queued.fetch_add(line.len(), Ordering::AcqRel);
        let _ = self.tx.try_send(line);
    }

    /// Completes when the client has gone.
    pub(crate) async fn closed(&self) {
        self.tx.closed().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_backlog_waits_then_gives_up() {
        let (b, body) = channel(Limits {
            bytes: 10,
            patience: Duration::from_secs(5),
        });
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
    }

    #[tokio::test(start_paused = true)]
    async fn one_event_larger_than_the_limit_passes_an_empty_backlog() {
        let (b, body) = channel(Limits {
            bytes: 4,
            patience: Duration::from_secs(1),
        });
        assert_eq!(
            b.send(Bytes::from_static(b"much too long")).await,
            Sent::Queued
        );
        drop(b);
        let chunks: Vec<_> = body.into_data_stream().collect().await;
        assert_eq!(chunks.len(), 1);
    }
}
