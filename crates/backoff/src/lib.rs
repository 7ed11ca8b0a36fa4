//! The one retry backoff of every volhealth component: delays that double from a first delay up
//! to a cap, each drawn with *equal jitter*.
//!
//! Without jitter, every agent of a DaemonSet that lost the API server at the same moment retries
//! at the same moments, and they all come back in lockstep when it returns. With equal jitter the
//! delay of the n-th retry is drawn uniformly from `[nominal / 2, nominal]`, where
//! `nominal = min(first × 2ⁿ⁻¹, cap)`:
//!
//! - never above the cap (`delay ≤ nominal ≤ cap`);
//! - never below half the nominal delay, so a retry never comes at once (full jitter, drawn from
//!   `[0, nominal]`, would let some replicas retry immediately, every time);
//! - the floor doubles with the nominal delay until the cap, so the waits grow.
//!
//! Tests that check an exact schedule build the backoff [`without_jitter`](Backoff::without_jitter)
//! (the nominal delays themselves) or with a fixed [`seed`](Backoff::with_seed).
//!
//! This crate has no dependency besides `rand`, so the low-level CSI client can use it without
//! the Kubernetes client; `volhealth-kube-access` re-exports it for everything else.

mod holds;

pub use holds::Holds;
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use std::time::Duration;

/// Doubling delays from a first delay up to a cap, each drawn with equal jitter.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    cap: Duration,
    /// The nominal delay of the next retry.
    next: Duration,
    failures: u32,
    /// `None`: no jitter, the nominal delays themselves.
    rng: Option<SmallRng>,
}

impl Backoff {
    /// Delays from `first`, doubling up to `cap` (a cap below `first` is raised to it), with
    /// equal jitter from a generator seeded by the operating system.
    pub fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            first,
            cap: cap.max(first),
            next: first,
            failures: 0,
            rng: Some(SmallRng::from_os_rng()),
        }
    }

    /// The same delays with jitter from a generator seeded with `seed`, for reproducible tests.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Backoff {
        self.rng = Some(SmallRng::seed_from_u64(seed));
        self
    }

    /// The nominal delays without jitter, for tests that check the schedule itself.
    #[must_use]
    pub fn without_jitter(mut self) -> Backoff {
        self.rng = None;
        self
    }

    /// The delay before the next retry, after one more failure: drawn from
    /// `[nominal / 2, nominal]`, then the nominal delay doubles (up to the cap).
    pub fn next_delay(&mut self) -> Duration {
        let nominal = self.next;
        self.next = nominal.saturating_mul(2).min(self.cap);
        self.failures = self.failures.saturating_add(1);
        match self.rng.as_mut() {
            None => nominal,
            Some(rng) => equal_jitter(nominal, rng),
        }
    }

    /// The nominal delay the next [`next_delay`](Backoff::next_delay) is drawn under.
    pub fn nominal(&self) -> Duration {
        self.next
    }

    /// Failures since the last [`reset`](Backoff::reset).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The first delay.
    pub fn first(&self) -> Duration {
        self.first
    }

    /// The longest nominal delay.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// Starts over from the first delay (after a success).
    pub fn reset(&mut self) {
        self.next = self.first;
        self.failures = 0;
    }
}

/// A delay drawn uniformly from `[nominal / 2, nominal]`.
fn equal_jitter(nominal: Duration, rng: &mut SmallRng) -> Duration {
    let half = nominal / 2;
    let spread = u64::try_from((nominal - half).as_nanos()).unwrap_or(u64::MAX);
    half + Duration::from_nanos(rng.random_range(0..=spread))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_jitter_the_delays_double_up_to_the_cap_and_start_over_on_reset() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5)).without_jitter();
        let delays: Vec<u64> = (0..5).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(b.failures(), 5);
        b.reset();
        assert_eq!(b.failures(), 0);
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn the_same_seed_draws_the_same_delays_and_others_differ() {
        let draw = |seed| {
            let mut b =
                Backoff::new(Duration::from_secs(1), Duration::from_secs(60)).with_seed(seed);
            (0..8).map(|_| b.next_delay()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(
            draw(7),
            draw(8),
            "replicas with other seeds wait differently"
        );
    }

    #[test]
    fn a_cap_below_the_first_delay_is_the_first_delay() {
        let mut b = Backoff::new(Duration::from_secs(2), Duration::from_secs(1)).without_jitter();
        assert_eq!(b.cap(), Duration::from_secs(2));
        assert_eq!(b.next_delay(), Duration::from_secs(2));
        assert_eq!(b.next_delay(), Duration::from_secs(2));
    }
}

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
