//! Wall-clock time for lastTransitionTime, injectable so tests control it.

use jiff::Timestamp;

/// Source of the current time written into lastTransitionTime.
pub trait Clock: Send + Sync {
    /// Now, truncated to whole seconds (the API stores seconds, so the agent's copy matches what is read back).
    fn now(&self) -> Timestamp;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let now = Timestamp::now();
        Timestamp::from_second(now.as_second()).unwrap_or(now)
    }
}
