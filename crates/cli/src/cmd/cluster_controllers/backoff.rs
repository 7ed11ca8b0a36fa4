//! Per-object retry backoff: a step that failed for an object is not tried again for that
//! object before its delay (1 s, doubling to 1 min) has passed; other objects go on.

use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// The first delay after a failure.
const FIRST: Duration = Duration::from_secs(1);
/// The longest delay.
const MAX: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    not_before: Instant,
}

/// The objects whose last attempt failed, keyed by what was attempted (e.g. `provision/<uid>`).
#[derive(Debug, Default)]
pub struct Retries {
    failed: HashMap<String, Entry>,
}

impl Retries {
    /// Whether `key` may be attempted at `now`.
    pub fn ready(&self, key: &str, now: Instant) -> bool {
        self.failed.get(key).is_none_or(|e| now >= e.not_before)
    }

    /// Records a failure at `now`; returns the delay before the next attempt.
    pub fn failed(&mut self, key: &str, now: Instant) -> Duration {
        let delay = match self.failed.get(key) {
            Some(e) => (e.delay * 2).min(MAX),
            None => FIRST,
        };
        self.failed.insert(
            key.to_string(),
            Entry {
                delay,
                not_before: now + delay,
            },
        );
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
        let mut r = Retries::default();
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
}
