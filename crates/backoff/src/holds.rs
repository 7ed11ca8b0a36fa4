//! Per-key holds over [`Backoff`]: a key whose last attempt failed is held back until its own
//! delay has passed, while other keys go on. Both the status writers (objects whose writes are
//! refused) and the local cluster's controllers (objects whose step failed) hold keys this way.
//!
//! The clock is the caller's: `now` is any instant that can be compared and moved forward by a
//! [`Duration`] (`std::time::Instant`, or tokio's, whose paused clock the tests use).

use crate::Backoff;
use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::ops::Add;
use std::time::Duration;

/// Keys held back after failures, each with its own doubling, jittered delay.
#[derive(Debug)]
pub struct Holds<K, T> {
    first: Duration,
    cap: Duration,
    jitter: bool,
    held: HashMap<K, Hold<T>>,
}

#[derive(Debug)]
struct Hold<T> {
    backoff: Backoff,
    until: T,
}

impl<T> Hold<T> {
    fn new(first: Duration, cap: Duration, jitter: bool, now: T) -> Self {
        // Each key draws its own jitter from a fresh generator: keys that failed together do
        // not come back together.
        let backoff = Backoff::new(first, cap);
        Hold {
            backoff: if jitter {
                backoff
            } else {
                backoff.without_jitter()
            },
            until: now,
        }
    }
}

impl<K: Clone + Eq + Hash, T: Copy + Ord + Add<Duration, Output = T>> Holds<K, T> {
    /// Holds of `first`, doubling up to `cap`, jittered.
    pub fn new(first: Duration, cap: Duration) -> Self {
        Holds {
            first,
            cap,
            jitter: true,
            held: HashMap::new(),
        }
    }

    /// The nominal holds without jitter, for tests of the schedule.
    #[must_use]
    pub fn without_jitter(mut self) -> Self {
        self.jitter = false;
        self
    }

    /// Whether `key` may be attempted at `now`.
    pub fn ready<Q: Hash + Eq + ?Sized>(&self, key: &Q, now: T) -> bool
    where
        K: Borrow<Q>,
    {
        self.held.get(key).is_none_or(|h| now >= h.until)
    }

    /// Records a failure of `key` at `now`: returns how long it is held, and whether this is the
    /// first failure in a row (the one to log loudly).
    pub fn failed<Q: Hash + Eq + ToOwned<Owned = K> + ?Sized>(
        &mut self,
        key: &Q,
        now: T,
    ) -> (Duration, bool)
    where
        K: Borrow<Q>,
    {
        let (first, cap, jitter) = (self.first, self.cap, self.jitter);
        let hold = self
            .held
            .entry(key.to_owned())
            .or_insert_with(|| Hold::new(first, cap, jitter, now));
        let delay = hold.backoff.next_delay();
        hold.until = now + delay;
        (delay, hold.backoff.failures() == 1)
    }

    /// Whether `key` is in a run of failures (held now, or held since its last success).
    pub fn is_held<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.held.contains_key(key)
    }

    /// Forgets `key`'s failures after a success; true when that ends a run of failures.
    pub fn succeeded<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.held.remove(key).is_some()
    }

    /// Forgets the keys `keep` does not keep (objects that no longer exist).
    pub fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        self.held.retain(|k, _| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_failed_key_is_held_for_doubling_delays_and_others_go_on() {
        let mut h = Holds::new(Duration::from_secs(1), Duration::from_secs(4)).without_jitter();
        let t0 = Instant::now();
        assert!(h.ready(&"a", t0) && !h.is_held(&"a"));
        assert_eq!(h.failed(&"a", t0), (Duration::from_secs(1), true));
        assert!(!h.ready(&"a", t0) && h.ready(&"b", t0) && h.is_held(&"a"));
        assert!(h.ready(&"a", t0 + Duration::from_secs(1)));
        let delays: Vec<u64> = (0..3).map(|_| h.failed(&"a", t0).0.as_secs()).collect();
        assert_eq!(delays, [2, 4, 4]);
        assert!(h.succeeded(&"a"));
        assert!(!h.succeeded(&"a"), "a success ends a run only once");
        assert_eq!(h.failed(&"a", t0), (Duration::from_secs(1), true));
        h.retain(|k| *k != "a");
        assert!(!h.is_held(&"a"));
    }

    #[test]
    fn jittered_holds_stay_between_half_and_all_of_the_nominal_delay() {
        let mut h = Holds::new(Duration::from_secs(1), Duration::from_secs(8));
        let t0 = Instant::now();
        for nominal in [1, 2, 4, 8, 8] {
            let nominal = Duration::from_secs(nominal);
            let (d, _) = h.failed(&"a", t0);
            assert!(d <= nominal && d >= nominal / 2, "{d:?} for {nominal:?}");
            assert!(!h.ready(&"a", t0 + d - Duration::from_nanos(1)) && h.ready(&"a", t0 + d));
        }
    }
}
