//! Where `lastTransitionTime` values come from, injectable so tests control it. Precision is
//! not the clock's business: `volhealth_model` cuts every time it writes to whole seconds.

use jiff::Timestamp;

/// The wall clock of a writer.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that follows tokio's (pausable) time from a fixed start, for tests on paused time.
#[derive(Debug, Clone)]
pub struct TokioClock {
    base: Timestamp,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock showing 2026-01-01T00:00:00Z now.
    pub fn new() -> Self {
        TokioClock {
            base: Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH),
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        self.base
            .checked_add(self.start.elapsed())
            .unwrap_or(self.base)
    }
}
