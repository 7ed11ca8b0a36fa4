//! Per-object retry backoff: a step that failed for an object is not tried again for that
//! object before its delay (1 s, doubling to 1 min, each jittered: the shared
//! [`Holds`], from half to all of the nominal delay) has passed; other objects go on.

use std::time::Duration;
use tokio::time::Instant;
use volhealth_kube_access::Holds;

/// The first delay after a failure.
const FIRST: Duration = Duration::from_secs(1);
/// The longest delay.
const MAX: Duration = Duration::from_secs(60);

/// The objects whose last attempt failed, keyed by what was attempted (e.g. `provision/<uid>`).
#[derive(Debug)]
pub struct Retries {
    holds: Holds<String, Instant>,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            holds: Holds::new(FIRST, MAX),
        }
    }
}

impl Retries {
    /// Retries with the nominal delays, for tests of the schedule.
    #[cfg(test)]
    fn without_jitter() -> Self {
        Retries {
            holds: Holds::new(FIRST, MAX).without_jitter(),
        }
    }

    /// Whether `key` may be attempted at `now`.
    pub fn ready(&self, key: &str, now: Instant) -> bool {
        self.holds.ready(key, now)
    }

    /// Records a failure at `now`; returns the delay before the next attempt.
    pub fn failed(&mut self, key: &str, now: Instant) -> Duration {
        self.holds.failed(key, now).0
    }

    /// Forgets `key`'s failures after a success.
    pub fn succeeded(&mut self, key: &str) {
        self.holds.succeeded(key);
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
