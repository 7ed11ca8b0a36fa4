//! The status write itself, the same for every object both writers write: a write is attempted
//! only when the object is not held back, its outcome is classified once ([`crate::api`]),
//! counted, logged once per run of failures, remembered in the own-writes overlay, backed off by
//! the one policy ([`crate::backoff`]), and its transition raised as an Event.

use crate::api::{ApiFailure, FailureKind};
use crate::backoff::{RefusalBackoff, UnreachableBackoff};
use crate::events::{EventRecorder, HealthEvent, field_dropped_event};
use crate::field::HealthField;
use crate::metrics::WriterMetrics;
use crate::overlay::OwnWrites;
use std::fmt::Display;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// An object as the writer's cache shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stored<V> {
    /// Its uid (for Events).
    pub uid: Option<String>,
    /// Its resourceVersion (to tell whether the cache has caught up with our own writes).
    pub resource_version: Option<String>,
    /// The health field as cached.
    pub value: V,
}

/// What the API server stored after a 2xx patch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Patched<V> {
    /// The object's new resourceVersion.
    pub resource_version: Option<String>,
    /// The health field as the API server returned it (empty when it dropped the field).
    pub value: V,
}

/// One kind of object a writer writes: what it needs to know besides the shared machinery.
pub trait Target: Send + Sync + 'static {
    /// How the writer names an object.
    type Key: Clone + Eq + Hash + Display + Send + Sync + 'static;
    /// The health field's value (`Option<VolumeHealthStatus>`, a list of entries).
    type Value: HealthField;
    /// The resource written, as the `resource` label spells it (`pods/status`).
    fn resource(&self) -> &'static str;
    /// Patches the object's health field to `value`.
    fn patch(
        &self,
        key: &Self::Key,
        value: &Self::Value,
    ) -> impl Future<Output = Result<Patched<Self::Value>, ApiFailure>> + Send;
    /// Called after `value` was stored for `key` (e.g. to make metric series follow it).
    fn written(&self, _key: &Self::Key, _value: &Self::Value) {}
    /// The Events a stored change from `before` to `after` deserves.
    fn transitions(
        &self,
        key: &Self::Key,
        stored: &Stored<Self::Value>,
        before: &Self::Value,
        after: &Self::Value,
    ) -> Vec<HealthEvent>;
}

/// How one write ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<V> {
    /// Stored; the value the API server returned.
    Written(V),
    /// Not attempted: the object is held back after refusals, or the API server is unreachable.
    Held,
    /// Accepted without storing the field (its feature gate is off); held back now.
    Dropped,
    /// Refused with a 4xx; held back now.
    Refused(ApiFailure),
    /// Refused with 403 (the agent stops on this: its credentials are for another node).
    Forbidden(ApiFailure),
    /// The object is gone.
    Gone,
    /// 409: retry with fresh state at the normal rate.
    Conflict,
    /// No answer, 429 or 5xx: every write waits ([`StatusWriter::unreachable_until`]).
    Unavailable,
}

struct State<K, V> {
    overlay: OwnWrites<K, V>,
    refusals: RefusalBackoff<K>,
    unreachable: UnreachableBackoff,
    /// The last answered write had its health field dropped (the API server's gate is off).
    field_dropped: bool,
    /// The one Event saying so was raised.
    dropped_announced: bool,
}

/// The shared write path for one [`Target`].
pub struct StatusWriter<T: Target> {
    target: T,
    metrics: Arc<WriterMetrics>,
    events: Arc<EventRecorder>,
    state: Mutex<State<T::Key, T::Value>>,
}

impl<T: Target> std::fmt::Debug for StatusWriter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter")
            .field("resource", &self.target.resource())
            .finish_non_exhaustive()
    }
}

impl<T: Target> StatusWriter<T> {
    /// A writer of `target` for a component probing every `interval`.
    pub fn new(
        target: T,
        interval: Duration,
        metrics: Arc<WriterMetrics>,
        events: Arc<EventRecorder>,
    ) -> Self {
        StatusWriter {
            target,
            metrics,
            events,
            state: Mutex::new(State {
                overlay: OwnWrites::new(),
                refusals: RefusalBackoff::new(interval),
                unreachable: UnreachableBackoff::new(interval),
                field_dropped: false,
                dropped_announced: false,
            }),
        }
    }

    /// Holds objects back for the nominal times, without jitter, from now on: for tests that
    /// check the schedule itself (2, 4, 8 … intervals).
    pub fn use_nominal_holds(&self) {
        let mut state = self.state();
        let refusals = std::mem::replace(&mut state.refusals, RefusalBackoff::new(Duration::ZERO));
        state.refusals = refusals.without_jitter();
        let unreachable = std::mem::replace(
            &mut state.unreachable,
            UnreachableBackoff::new(Duration::ZERO),
        );
        state.unreachable = unreachable.without_jitter();
    }

    fn state(&self) -> MutexGuard<'_, State<T::Key, T::Value>> {
        // The maps are caches; a panic elsewhere cannot leave them harmful.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The target.
    pub fn target(&self) -> &T {
        &self.target
    }

    /// The value stored now: our own last write while the cache has not caught up with it.
    pub fn effective(&self, key: &T::Key, stored: &Stored<T::Value>) -> T::Value {
        self.effective_at(key, stored).0
    }

    /// [`StatusWriter::effective`], and [`StatusWriter::own_write`] as of that read.
    pub(crate) fn effective_at(&self, key: &T::Key, stored: &Stored<T::Value>) -> (T::Value, u64) {
        let mut s = self.state();
        let value = s
            .overlay
            .effective(key, stored.resource_version.as_deref(), &stored.value);
        (value, s.overlay.generation(key))
    }

    /// How often the own-writes overlay was read.
    #[cfg(test)]
    pub(crate) fn overlay_reads(&self) -> usize {
        self.state().overlay.reads
    }

    /// Which of our own writes of `key` is what is stored now while the cache lags behind it (0:
    /// none, the cache is the truth). It changes whenever a write of ours lands, or the cache
    /// catches up: a decision taken against another one is out of date.
    pub(crate) fn own_write(&self, key: &T::Key) -> u64 {
        self.state().overlay.generation(key)
    }

    /// Whether `key` is held back after a refused or dropped write, so a new report for it is
    /// not even queued.
    pub fn is_held(&self, key: &T::Key) -> bool {
        let s = self.state();
        s.refusals.is_refused(key)
            && !(s.refusals.allowed(key) && s.unreachable.waiting_until().is_none())
    }

    /// Whether a write of `key` would be attempted now.
    pub fn may_write(&self, key: &T::Key) -> bool {
        let s = self.state();
        s.refusals.allowed(key) && s.unreachable.waiting_until().is_none()
    }

    /// Whether `key` is in a run of refused or dropped writes.
    pub fn is_refused(&self, key: &T::Key) -> bool {
        self.state().refusals.is_refused(key)
    }

    /// Until when every write waits because the API server could not be reached.
    pub fn unreachable_until(&self) -> Option<Instant> {
        self.state().unreachable.waiting_until()
    }

    /// Whether the last write could not reach the API server (for `/readyz`).
    pub fn api_unreachable(&self) -> bool {
        self.state().unreachable.is_unreachable()
    }

    /// Whether the API server dropped the health field from the last write it answered: its
    /// `CSIVolumeHealth` feature gate is off, and no object will show health (for `/readyz`).
    pub fn drops_field(&self) -> bool {
        self.state().field_dropped
    }

    /// Forgets objects that no longer exist.
    pub fn retain(&self, keep: impl Fn(&T::Key) -> bool) {
        let mut s = self.state();
        s.overlay.retain(&keep);
        s.refusals.retain(&keep);
    }

    fn raise(&self, events: Vec<HealthEvent>) {
        for e in events {
            self.events.record(e);
        }
    }

    /// Writes `after` over `before` (the effective stored value) unless the object is held back.
    pub async fn write(
        &self,
        key: &T::Key,
        stored: &Stored<T::Value>,
        before: &T::Value,
        after: T::Value,
    ) -> Outcome<T::Value> {
        if !self.may_write(key) {
            return Outcome::Held;
        }
        let resource = self.target.resource();
        let result = self.target.patch(key, &after).await;
        let failure = match result {
            Ok(patched) => {
                self.state().unreachable.reached();
                if !after.is_empty() && patched.value.is_empty() {
                    self.metrics.write(resource, "dropped");
                    self.metrics.set_field_dropped(resource, true);
                    let (hold, first, announce) = {
                        let mut s = self.state();
                        s.field_dropped = true;
                        let announce = !std::mem::replace(&mut s.dropped_announced, true);
                        let (hold, first) = s.refusals.refused(key);
                        (hold, first, announce)
                    };
                    if first {
                        tracing::warn!(object = %key, %resource, retry_in = %volhealth_daemon::duration::format(hold),
                            "the API server accepted the write but did not store the health field (is its CSIVolumeHealth feature gate off?); retrying this object slowly");
                        // The status cannot carry the news, so the transition is at least an Event, once.
                        let transitions = self.target.transitions(key, stored, before, &after);
                        if announce && let Some(first) = transitions.first() {
                            self.events
                                .record(field_dropped_event(&first.object, resource));
                        }
                        self.raise(transitions);
                    }
                    return Outcome::Dropped;
                }
                self.metrics.write(resource, "success");
                self.metrics.set_field_dropped(resource, false);
                let again = {
                    let mut s = self.state();
                    s.field_dropped = false;
                    s.overlay.record(
                        key,
                        stored.resource_version.clone(),
                        patched.resource_version.clone(),
                        patched.value.clone(),
                    );
                    s.refusals.accepted(key)
                };
                if again {
                    tracing::info!(object = %key, %resource, "health status write accepted again");
                }
                tracing::info!(object = %key, %resource, "updated the health status");
                self.target.written(key, &patched.value);
                self.raise(self.target.transitions(key, stored, before, &patched.value));
                return Outcome::Written(patched.value);
            }
            Err(f) => f,
        };
        let kind = failure.kind();
        self.metrics.write(resource, kind.result_label());
        match kind {
            FailureKind::Gone => {
                self.state().unreachable.reached();
                tracing::debug!(object = %key, %resource, "the object is gone; nothing to write");
                Outcome::Gone
            }
            FailureKind::Conflict => {
                self.state().unreachable.reached();
                tracing::info!(object = %key, %resource, error = %failure, "write conflicted with another change; retrying with fresh state");
                Outcome::Conflict
            }
            FailureKind::Refused | FailureKind::Forbidden => {
                let (hold, first) = {
                    let mut s = self.state();
                    s.unreachable.reached();
                    s.refusals.refused(key)
                };
                if first {
                    tracing::warn!(object = %key, %resource, error = %failure, retry_in = %volhealth_daemon::duration::format(hold),
                        "the API server refused the health status write; retrying this object slowly");
                    self.raise(self.target.transitions(key, stored, before, &after));
                } else {
                    tracing::debug!(object = %key, %resource, error = %failure, "health status write refused again");
                }
                if kind == FailureKind::Forbidden {
                    Outcome::Forbidden(failure)
                } else {
                    Outcome::Refused(failure)
                }
            }
            FailureKind::Unavailable => {
                let (wait, first) = self.state().unreachable.failed();
                if first {
                    tracing::warn!(object = %key, %resource, error = %failure, retry_in = %volhealth_daemon::duration::format(wait),
                        "the API server could not be reached; holding status writes back");
                } else {
                    tracing::debug!(object = %key, %resource, error = %failure, "the API server is still unreachable");
                }
                Outcome::Unavailable
            }
        }
    }

    /// Records that the API server answered a request other than a write (a cheap probe while
    /// backing off), so writing resumes at once.
    pub fn api_answered(&self) {
        if self.state().unreachable.reached() {
            tracing::info!(resource = %self.target.resource(), "the API server answers again; resuming status writes");
        }
    }
}
