//! The one backoff policy of both writers, over the shared jittered backoff
//! ([`volhealth_kube_access::Backoff`]: each wait drawn from half to all of its nominal value).
//!
//! - A write the API server refuses (4xx) or accepts without storing the field (its
//!   `CSIVolumeHealth` gate is off) holds that object back: twice the probe interval after the
//!   first refusal, doubling, capped at ten intervals or five minutes, whichever is longer.
//! - While the API server cannot be reached (no answer, 429, 5xx) all writes wait: one second
//!   after the first failure, doubling, capped at one probe interval (at most a minute), so
//!   writing resumes within an interval of the server answering again. The jitter keeps the
//!   agents of a DaemonSet, which all lost the server at once, from all coming back at once.

use std::hash::Hash;
use std::time::Duration;
use tokio::time::Instant;
use volhealth_kube_access::{Backoff, Holds};

/// Longest hold of a refused object is at least this.
const MIN_REFUSAL_CAP: Duration = Duration::from_secs(300);
/// First wait after the API server could not be reached.
const FIRST_UNREACHABLE_WAIT: Duration = Duration::from_secs(1);
/// Longest wait while it stays unreachable, whatever the interval.
const MAX_UNREACHABLE_WAIT: Duration = Duration::from_secs(60);

/// Per-object holds after refused or dropped writes.
#[derive(Debug)]
pub struct RefusalBackoff<K> {
    holds: Holds<K, Instant>,
}

impl<K: Clone + Eq + Hash> RefusalBackoff<K> {
    /// The policy for a writer probing every `interval`.
    pub fn new(interval: Duration) -> Self {
        RefusalBackoff {
            holds: Holds::new(
                interval.saturating_mul(2),
                (interval * 10).max(MIN_REFUSAL_CAP),
            ),
        }
    }

    /// The same policy without jitter: the nominal holds, for tests of the schedule.
    #[must_use]
    pub fn without_jitter(mut self) -> Self {
        self.holds = self.holds.without_jitter();
        self
    }

    /// Whether `key` may be written now.
    pub fn allowed(&self, key: &K) -> bool {
        self.holds.ready(key, Instant::now())
    }

    /// Records a refusal and returns how long the object is held; `first` is true for the first
    /// refusal in a row (the one to log loudly).
    pub fn refused(&mut self, key: &K) -> (Duration, bool) {
        self.holds.failed(key, Instant::now())
    }

    /// Whether `key` is in a run of refusals (held now or held before its last success).
    pub fn is_refused(&self, key: &K) -> bool {
        self.holds.is_held(key)
    }

    /// Records a write that stuck; true when it ends a run of refusals.
    pub fn accepted(&mut self, key: &K) -> bool {
        self.holds.succeeded(key)
    }

    /// Forgets objects that no longer exist.
    pub fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        self.holds.retain(keep);
    }
}

/// The wait while the API server cannot be reached.
#[derive(Debug)]
pub struct UnreachableBackoff {
    backoff: Backoff,
    until: Option<Instant>,
}

impl UnreachableBackoff {
    /// The policy for a writer probing every `interval`.
    pub fn new(interval: Duration) -> Self {
        UnreachableBackoff {
            backoff: Backoff::new(
                FIRST_UNREACHABLE_WAIT,
                interval.clamp(FIRST_UNREACHABLE_WAIT, MAX_UNREACHABLE_WAIT),
            ),
            until: None,
        }
    }

    /// The same policy without jitter: the nominal waits, for tests of the schedule.
    #[must_use]
    pub fn without_jitter(mut self) -> Self {
        self.backoff = self.backoff.without_jitter();
        self
    }

    /// Records a failure to reach the server; returns the wait and whether it is the first in a row.
    pub fn failed(&mut self) -> (Duration, bool) {
        let first = self.until.is_none();
        let wait = self.backoff.next_delay();
        self.until = Some(Instant::now() + wait);
        (wait, first)
    }

    /// Records an answer from the server; true when it ends a run of failures.
    pub fn reached(&mut self) -> bool {
        self.backoff.reset();
        self.until.take().is_some()
    }

    /// When writes may be attempted again, while waiting.
    pub fn waiting_until(&self) -> Option<Instant> {
        self.until.filter(|u| Instant::now() < *u)
    }

    /// Whether the last attempt failed to reach the server (for `/readyz`).
    pub fn is_unreachable(&self) -> bool {
        self.until.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn refusals_wait_longer_each_time_up_to_the_cap() {
        let s = Duration::from_secs(10);
        let mut b = RefusalBackoff::new(s).without_jitter();
        assert!(b.allowed(&"k"));
        assert_eq!(b.refused(&"k"), (2 * s, true));
        assert!(!b.allowed(&"k"));
        tokio::time::advance(2 * s).await;
        assert!(b.allowed(&"k"));
        assert_eq!(b.refused(&"k"), (4 * s, false));
        for _ in 0..20 {
            b.refused(&"k");
        }
        assert_eq!(
            b.refused(&"k").0,
            MIN_REFUSAL_CAP,
            "capped at 5 min for a 10 s interval"
        );
        assert!(b.allowed(&"other"));
        assert!(b.accepted(&"k"));
        assert!(b.allowed(&"k"));
        assert!(!b.accepted(&"k"));
        let mut slow = RefusalBackoff::new(Duration::from_secs(60)).without_jitter();
        for _ in 0..10 {
            slow.refused(&"k");
        }
        assert_eq!(
            slow.refused(&"k").0,
            Duration::from_secs(600),
            "ten intervals when longer"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unreachable_waits_double_up_to_one_interval() {
        let mut b = UnreachableBackoff::new(Duration::from_secs(5)).without_jitter();
        assert_eq!(b.failed(), (Duration::from_secs(1), true));
        assert_eq!(b.failed(), (Duration::from_secs(2), false));
        assert_eq!(b.failed().0, Duration::from_secs(4));
        assert_eq!(b.failed().0, Duration::from_secs(5));
        assert_eq!(b.failed().0, Duration::from_secs(5));
        assert!(b.waiting_until().is_some() && b.is_unreachable());
        assert!(b.reached());
        assert!(!b.is_unreachable());
        assert_eq!(b.failed().0, Duration::from_secs(1));
        assert_eq!(
            UnreachableBackoff::new(Duration::from_secs(600))
                .backoff
                .cap(),
            MAX_UNREACHABLE_WAIT
        );
    }

    #[tokio::test(start_paused = true)]
    async fn with_jitter_each_wait_is_between_half_and_all_of_the_nominal_one() {
        let mut b = UnreachableBackoff::new(Duration::from_secs(5));
        for nominal in [1, 2, 4, 5, 5, 5] {
            let nominal = Duration::from_secs(nominal);
            let (wait, _) = b.failed();
            assert!(
                wait <= nominal && wait >= nominal / 2,
                "{wait:?} for {nominal:?}"
            );
        }
        let s = Duration::from_secs(10);
        let mut r = RefusalBackoff::new(s);
        for nominal in [
            2 * s,
            4 * s,
            8 * s,
            16 * s,
            MIN_REFUSAL_CAP,
            MIN_REFUSAL_CAP,
        ] {
            let (hold, _) = r.refused(&"k");
            assert!(
                hold <= nominal && hold >= nominal / 2,
                "{hold:?} for {nominal:?}"
            );
            assert!(!r.allowed(&"k"));
        }
    }
}
