//! The single writer: takes the latest desired status per claim from the queue and patches it,
//! only while this replica leads, within the client rate limit, backing off while the API server
//! is unreachable and slowing down for claims whose writes the API server drops.

use crate::claims::ClaimStore;
use crate::engine::Shared;
use crate::events::{condition_keys, transition_event};
use crate::rate_limit::RateLimiter;
use crate::status_writer::{StatusWriter, WriteError};
use crate::write_queue::{PendingWrite, WriteItem};
use crate::write_state::WriteState;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use volhealth_model::VolumeHealthStatus;

/// First wait after the API server could not be reached.
const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between attempts while it stays unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Locks the shared write state; a poisoned lock only means a panicking test thread, so go on.
pub(crate) fn lock(state: &Mutex<WriteState>) -> std::sync::MutexGuard<'_, WriteState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

enum Outcome {
    Done,
    Retry(PendingWrite),
}

/// The writer task's parts.
pub struct WriteLoop<W: StatusWriter, C: ClaimStore> {
    /// The API server's write side.
    pub writer: Arc<W>,
    /// The claim cache (for the stored value at write time).
    pub claims: Arc<C>,
    /// The queue, the write state and the metrics.
    pub shared: Arc<Shared>,
    /// `--kube-api-qps` / `--kube-api-burst`.
    pub limiter: RateLimiter,
    /// Whether this replica leads (always true without leader election).
    pub leader: watch::Receiver<bool>,
    /// How long a claim whose write was dropped or rejected waits before the next attempt.
    pub dropped_retry: Duration,
}

impl<W: StatusWriter, C: ClaimStore> WriteLoop<W, C> {
    /// Writes until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut backoff = MIN_BACKOFF;
        loop {
            let item = tokio::select! {
                _ = &mut shutdown => return,
                item = self.shared.queue.next() => item,
            };
            if !*self.leader.borrow() {
                continue;
            }
            tokio::select! {
                _ = &mut shutdown => return,
                _ = self.limiter.acquire() => {}
            }
            match item {
                WriteItem::Event(e) => {
                    if let Err(err) = self.writer.event(&e).await {
                        tracing::debug!(claim = %e.key, reason = e.reason, error = %err, "could not create event");
                    }
                }
                WriteItem::Status(w) => match self.write(w).await {
                    Outcome::Done => backoff = MIN_BACKOFF,
                    Outcome::Retry(w) => {
                        self.shared.queue.retry(w);
                        tokio::select! {
                            _ = &mut shutdown => return,
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                },
            }
        }
    }

    async fn write(&mut self, w: PendingWrite) -> Outcome {
        let Some(stored) = self.claims.claim(&w.key) else {
            tracing::debug!(claim = %w.key, "claim is gone; nothing to write");
            return Outcome::Done;
        };
        let before = {
            let mut s = lock(&self.shared.state);
            if s.is_held(&w.key) {
                return Outcome::Done;
            }
            s.effective(&w.key, &stored)
        };
        if before == w.desired {
            return Outcome::Done;
        }
        // Checked again right before the write: a replica that lost the lease stops at once.
        if !*self.leader.borrow() {
            return Outcome::Done;
        }
        match self.writer.patch_health(&w.key, w.desired.as_ref()).await {
            Ok(patched) if w.desired.is_some() && patched.health.is_none() => {
                self.dropped(&w, &stored.uid, before.as_ref(), "the API server accepted the patch but did not store status.healthStatus (is its CSIVolumeHealth feature gate off?)");
                Outcome::Done
            }
            Ok(patched) => {
                self.shared.metrics.write("success");
                {
                    let mut s = lock(&self.shared.state);
                    s.record(&w.key, &patched);
                    s.release(&w.key);
                }
                let keys = condition_keys(patched.health.as_ref());
                tracing::info!(claim = %w.key, volume = %w.volume_id, conditions = ?keys, "updated the claim's health status");
                self.shared.metrics.set_claim_conditions(&w.key, keys);
                if let Some(e) = transition_event(
                    &w.key,
                    &stored.uid,
                    before.as_ref(),
                    patched.health.as_ref(),
                ) {
                    self.shared.queue.push_event(e);
                }
                Outcome::Done
            }
            Err(WriteError::NotFound) => {
                self.shared.metrics.write("error");
                tracing::debug!(claim = %w.key, "claim deleted before its status could be written");
                Outcome::Done
            }
            Err(WriteError::Rejected(msg)) => {
                self.dropped(&w, &stored.uid, before.as_ref(), &msg);
                Outcome::Done
            }
            Err(WriteError::Unavailable(msg)) => {
                self.shared.metrics.write("error");
                tracing::warn!(claim = %w.key, error = %msg, "API server unavailable; will retry");
                Outcome::Retry(w)
            }
        }
    }

    fn dropped(&self, w: &PendingWrite, uid: &str, before: Option<&VolumeHealthStatus>, why: &str) {
        self.shared.metrics.write("dropped");
        let (first_for_claim, first_ever) = {
            let mut s = lock(&self.shared.state);
            (
                s.hold(&w.key, Instant::now() + self.dropped_retry),
                s.first_drop_log(),
            )
        };
        if first_ever {
            tracing::warn!(claim = %w.key, reason = %why, retry_in = ?self.dropped_retry, "health status write was not stored; retrying such claims slowly");
        } else {
            tracing::debug!(claim = %w.key, reason = %why, "health status write was not stored");
        }
        // The status cannot carry the news, so the transition is at least visible as an Event, once.
        if first_for_claim
            && let Some(e) = transition_event(&w.key, uid, before, w.desired.as_ref())
        {
            self.shared.queue.push_event(e);
        }
    }
}
