//! Spreading a cycle's calls evenly over the interval, so many volumes are not probed in bursts,
//! and the ticker that starts one cycle per interval.
//!
//! The calls are spread over the first nine tenths of the interval, not all of it: the last
//! call's answer then has a tenth of the interval to arrive, and a healthy cycle ends within its
//! interval. Spread over the whole interval, a cycle whose calls were closer together than one
//! answer takes always ran over, so every cycle started late and was logged as an overrun.

use std::time::Duration;
use tokio::time::Instant;

/// The part of the interval, in tenths, over which a cycle's calls are spread.
const SPREAD_TENTHS: u32 = 9;

/// When the i-th of `n` calls of a cycle that started at `start` is due.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    start: Instant,
    spacing: Duration,
}

impl Pacer {
    /// `n` calls spread over the first nine tenths of `interval` from `start` (the first at once).
    pub fn new(start: Instant, interval: Duration, n: usize) -> Pacer {
        let spread = (interval / 10).saturating_mul(SPREAD_TENTHS);
        let spacing = spread / u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        Pacer { start, spacing }
    }

    /// When call `i` (counting from 0) is due.
    pub fn due(&self, i: usize) -> Instant {
        self.start
            + self
                .spacing
                .saturating_mul(u32::try_from(i).unwrap_or(u32::MAX))
    }
}

/// Starts one cycle per interval, measured from each cycle's start; a cycle that overran the
/// interval is logged and the next one starts at once (never two at a time).
#[derive(Debug)]
pub struct Ticker {
    interval: Duration,
    next: Instant,
    /// When the last cycle started.
    last_start: Option<Instant>,
}

impl Ticker {
    /// The first tick is due now.
    pub fn new(interval: Duration) -> Ticker {
        Ticker {
            interval,
            next: Instant::now(),
            last_start: None,
        }
    }

    /// The interval now.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Changes the interval: the next cycle is due one new interval after the last one started
    /// (at once, if that has passed).
    pub fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
        if let Some(start) = self.last_start {
            self.next = (start + interval).max(Instant::now());
        }
    }

    /// When the next cycle is due.
    pub fn next_due(&self) -> Instant {
        self.next
    }

    /// Makes the next cycle due now (e.g. a new leadership term).
    pub fn reset(&mut self) {
        self.next = Instant::now();
    }

    /// Records that a cycle which started at `start` has ended.
    pub fn cycle_done(&mut self, start: Instant, what: &str) {
        self.last_start = Some(start);
        self.next = start + self.interval;
        if self.next <= Instant::now() {
            tracing::warn!(interval = %volhealth_daemon::duration::format(self.interval), "{what} took longer than the interval");
            self.next = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn calls_are_spread_and_overruns_start_at_once() {
        let start = Instant::now();
        let p = Pacer::new(start, Duration::from_secs(10), 4);
        assert_eq!(p.due(0), start);
        assert_eq!(p.due(1), start + Duration::from_millis(2250));
        assert_eq!(
            p.due(3),
            start + Duration::from_millis(6750),
            "the last call leaves a tenth of the interval for answers"
        );
        assert_eq!(Pacer::new(start, Duration::from_secs(10), 0).due(0), start);
        let mut t = Ticker::new(Duration::from_secs(10));
        t.cycle_done(start, "test cycle");
        assert_eq!(t.next_due(), start + Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(12)).await;
        t.cycle_done(start, "test cycle");
        assert_eq!(t.next_due(), Instant::now());
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_interval_counts_from_the_last_start() {
        let start = Instant::now();
        let mut t = Ticker::new(Duration::from_secs(60));
        t.cycle_done(start, "test cycle");
        t.set_interval(Duration::from_secs(10));
        assert_eq!(t.next_due(), start + Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(30)).await;
        t.set_interval(Duration::from_secs(20));
        assert_eq!(t.next_due(), Instant::now(), "already passed: at once");
        t.set_interval(Duration::from_secs(120));
        assert_eq!(t.next_due(), start + Duration::from_secs(120));
        assert_eq!(t.interval(), Duration::from_secs(120));
    }
}
