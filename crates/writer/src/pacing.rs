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

/// A cycle that starts at most this fraction (1/n) of an interval after it was due keeps the
/// cadence of the ticks before it: its answers still have most of the tenth the pacer leaves.
pub const LATE_SLACK_PER: u32 = 100;

/// Where a cycle that was due at `due` and started at `start` counts its interval from: `due`, if
/// it started at most 1/[`LATE_SLACK_PER`] of `interval` after it (a timer's lateness, which
/// would otherwise add up cycle after cycle), else `start` (so a cycle that started well after
/// its time still gets a whole interval).
pub fn cycle_anchor(due: Instant, start: Instant, interval: Duration) -> Instant {
    if start >= due && start - due <= interval / LATE_SLACK_PER {
        due
    } else {
        start
    }
}

/// Whether a cycle counted from `anchor` (see [`cycle_anchor`]) that ended at `end` overran
/// `interval`: it ended when or after the next cycle was due, which then starts at once. The one
/// rule of both writers' `csi_volume_health_cycle_overruns_total`.
pub fn overran(anchor: Instant, interval: Duration, end: Instant) -> bool {
    end >= anchor + interval
}

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

/// Starts one cycle per interval, measured from when each cycle was due; a cycle that overran the
/// interval is logged and the next one starts at once (never two at a time).
///
/// A timer wakes a little after its deadline (tokio's wheel counts whole milliseconds, and the
/// thread must then be scheduled). Counting each interval from the wake-up instead added that
/// lateness to every cycle: at a 1 s interval a Get sweep of 5,000 volumes made about 4,992 calls
/// a second instead of 5,000. A cycle that starts within 1/[`LATE_SLACK_PER`] of an interval of
/// its due time therefore keeps the cadence; one that started later than that (after a reconnect,
/// say) counts its interval from its actual start, so its calls still have the whole interval.
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

    /// Records that a cycle which started at `start` has ended. The next one is due an interval
    /// after this one was due, if `start` was only a wake-up's lateness after that, else an
    /// interval after `start`. Answers whether the cycle overran: ended after the next was due.
    pub fn cycle_done(&mut self, start: Instant, what: &str) -> bool {
        let anchor = cycle_anchor(self.next, start, self.interval);
        self.last_start = Some(anchor);
        self.next = anchor + self.interval;
        let now = Instant::now();
        if overran(anchor, self.interval, now) {
            tracing::warn!(interval = %volhealth_daemon::duration::format(self.interval), "{what} took longer than the interval");
            self.next = now;
            return true;
        }
        false
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
        let ten = Duration::from_secs(10);
        assert!(!overran(start, ten, start + ten - Duration::from_millis(1)));
        assert!(
            overran(start, ten, start + ten),
            "ended just as the next was due"
        );
        let mut t = Ticker::new(Duration::from_secs(10));
        assert!(
            !t.cycle_done(start, "test cycle"),
            "ended within its interval"
        );
        assert_eq!(t.next_due(), start + Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(12)).await;
        assert!(
            t.cycle_done(start, "test cycle"),
            "ended after the next was due"
        );
        assert_eq!(t.next_due(), Instant::now());
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_wake_up_keeps_the_cadence_and_a_late_start_does_not_shorten_the_interval() {
        let interval = Duration::from_secs(1);
        let mut t = Ticker::new(interval);
        let first = t.next_due();
        // Woken 2 ms after the tick: the next tick is still one interval after the first.
        tokio::time::advance(Duration::from_millis(2)).await;
        let start = Instant::now();
        tokio::time::advance(Duration::from_millis(900)).await;
        t.cycle_done(start, "test cycle");
        assert_eq!(t.next_due(), first + interval);
        // Ten cycles, each started 2 ms late, end ten intervals after the first tick, not 20 ms
        // later.
        for _ in 0..9 {
            let due = t.next_due();
            tokio::time::advance(due + Duration::from_millis(2) - Instant::now()).await;
            let start = Instant::now();
            tokio::time::advance(Duration::from_millis(900)).await;
            t.cycle_done(start, "test cycle");
        }
        assert_eq!(t.next_due(), first + interval * 10);
        // A cycle that started 300 ms after its tick gets a whole interval from its start.
        let due = t.next_due();
        tokio::time::advance(due + Duration::from_millis(300) - Instant::now()).await;
        let start = Instant::now();
        t.cycle_done(start, "test cycle");
        assert_eq!(t.next_due(), start + interval);
        // So does one that started before it was due (nothing waits on the ticker in between).
        let start = Instant::now();
        t.cycle_done(start, "test cycle");
        assert_eq!(t.next_due(), start + interval);
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
