//! Per-object retry backoff: a step that failed for an object is not tried again for that
//! object before its delay (1 s, doubling to 1 min, each jittered: the shared
//! [`Backoff`], from half to all of the nominal delay) has passed; other objects go on.

use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;
use volhealth_kube_access::Backoff;

/// The first delay after a failure.
const FIRST: Duration = Duration::from_secs(1);
/// The longest delay.
const MAX: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct Entry {
    backoff: Backoff,
    not_before: Instant,
}

/// The objects whose last attempt failed, keyed by what was attempted (e.g. `provision/<uid>`).
#[derive(Debug)]
pub struct Retries {
    failed: HashMap<String, Entry>,
    jitter: bool,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            failed: HashMap::new(),
            jitter: true,
        }
    }
}

impl Retries {
    /// Retries with the nominal delays, for tests of the schedule.
    #[cfg(test)]
    fn without_jitter() -> Self {
        Retries {
            failed: HashMap::new(),
            jitter: false,
        }
    }

    /// Whether `key` may be attempted at `now`.
    pub fn ready(&self, key: &str, now: Instant) -> bool {
        self.failed.get(key).is_none_or(|e| now >= e.not_before)
    }

    /// Records a failure at `now`; returns the delay before the next attempt.
    pub fn failed(&mut self, key: &str, now: Instant) -> Duration {
        let jitter = self.jitter;
        let entry = self.failed.entry(key.to_string()).or_insert_with(|| {
            let backoff = Backoff::new(FIRST, MAX);
            Entry {
                backoff: if jitter {
                    backoff
                } else {
                    backoff.without_jitter()
                },
                not_before: now,
            }
        });
        let delay = entry.backoff.next_delay();
        entry.not_before = now + delay;
        delay
    }

    /// Forgets `key`'s failures after a success.
    pub fn succeeded(&mut self, key: &str) {
        self.failed.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_a_minute_and_reset_on_success() {
        let mut r = Retries::without_jitter();
        // Instants are only compared, never waited for: no clock is involved.
        let t0 = Instant::now();
        assert!(r.ready("a", t0));
        assert_eq!(r.failed("a", t0), Duration::from_secs(1));
        assert!(!r.ready("a", t0));
        assert!(r.ready("b", t0), "other objects are not held back");
        assert!(r.ready("a", t0 + Duration::from_secs(1)));
        let mut last = Duration::ZERO;
        for _ in 0..10 {
            last = r.failed("a", t0);
        }
        assert_eq!(last, MAX);
        r.succeeded("a");
        assert!(r.ready("a", t0));
        assert_eq!(r.failed("a", t0), FIRST);
    }

    #[test]
    fn jittered_delays_stay_between_half_and_all_of_the_nominal_delay() {
        let mut r = Retries::default();
        let t0 = Instant::now();
        for nominal in [1, 2, 4, 8, 16, 32, 60, 60] {
            let nominal = Duration::from_secs(nominal);
            let d = r.failed("a", t0);
            assert!(d <= nominal && d >= nominal / 2, "{d:?} for {nominal:?}");
            assert!(!r.ready("a", t0 + d - Duration::from_millis(1)) && r.ready("a", t0 + d));
        }
    }
}
