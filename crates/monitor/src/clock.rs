//! Wall-clock time for `lastTransitionTime`, injectable so tests control it.

use jiff::Timestamp;

/// Where `lastTransitionTime` values come from.
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

/// A clock that follows tokio's (pausable) time from a fixed start, for tests.
#[cfg(test)]
#[derive(Debug, Clone)]
pub struct TokioClock {
    base: Timestamp,
    start: tokio::time::Instant,
}

#[cfg(test)]
impl TokioClock {
    /// Starts at 2026-01-01T00:00:00Z now.
    pub fn new() -> Self {
        TokioClock {
            base: Timestamp::from_second(1_767_225_600).unwrap(),
            start: tokio::time::Instant::now(),
        }
    }
}

#[cfg(test)]
impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        self.base.checked_add(self.start.elapsed()).unwrap()
    }
}
