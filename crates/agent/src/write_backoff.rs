//! Slowing down writes the API server refuses (for example with the CSIVolumeHealth gate off).

use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    until: Instant,
}

/// Per-object exponential backoff for refused writes: the first refusal is reported, later ones wait longer and longer.
#[derive(Debug)]
pub struct WriteBackoff {
    base: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

impl WriteBackoff {
    /// Backoff starting at `base` (the probe interval) and capped at `max`.
    pub fn new(base: Duration, max: Duration) -> WriteBackoff {
        WriteBackoff {
            base,
            max: max.max(base),
            entries: HashMap::new(),
        }
    }

    /// Whether a write of `key` may be attempted at `now`.
    pub fn allowed(&self, key: &str, now: Instant) -> bool {
        self.entries.get(key).is_none_or(|e| now >= e.until)
    }

    /// Records a refusal; true for the first one in a row (the one to log).
    pub fn failed(&mut self, key: &str, now: Instant) -> bool {
        let failures = self
            .entries
            .get(key)
            .map_or(1, |e| e.failures.saturating_add(1));
        let factor = 2u32.saturating_pow(failures.min(16));
        let delay = self.base.saturating_mul(factor).min(self.max);
        self.entries.insert(
            key.to_string(),
            Entry {
                failures,
                until: now + delay,
            },
        );
        failures == 1
    }

    /// Records a success; true when it ends a run of refusals.
    pub fn succeeded(&mut self, key: &str) -> bool {
        self.entries.remove(key).is_some()
    }

    /// Drops the state of an object that is gone.
    pub fn forget(&mut self, key: &str) {
        self.entries.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_longer_after_each_refusal() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut b = WriteBackoff::new(s, Duration::from_secs(10));
        assert!(b.allowed("k", t0));
        assert!(b.failed("k", t0));
        assert!(!b.allowed("k", t0 + s));
        assert!(b.allowed("k", t0 + 2 * s));
        assert!(!b.failed("k", t0 + 2 * s));
        assert!(!b.allowed("k", t0 + 5 * s));
        assert!(b.allowed("k", t0 + 6 * s));
        for _ in 0..20 {
            b.failed("k", t0);
        }
        assert!(b.allowed("k", t0 + 10 * s), "capped");
        assert!(b.allowed("other", t0));
        assert!(b.succeeded("k"));
        assert!(b.allowed("k", t0));
        assert!(!b.succeeded("k"));
    }
}
