//! The documented bounds of the jittered delays, for any first delay, cap and seed: never above
//! the cap, never below half the nominal delay, and growing (the floor of each delay is at least
//! the floor of the one before).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use proptest::prelude::*;
use std::time::Duration;
use volhealth_backoff::Backoff;

proptest! {
    #[test]
    fn delays_stay_between_half_the_nominal_and_the_cap(
        first_ms in 1u64..10_000,
        cap_ms in 1u64..600_000,
        seed in any::<u64>(),
        retries in 1usize..40,
    ) {
        let (first, cap) = (Duration::from_millis(first_ms), Duration::from_millis(cap_ms));
        let mut jittered = Backoff::new(first, cap).with_seed(seed);
        let mut nominal = Backoff::new(first, cap).without_jitter();
        let mut last_floor = Duration::ZERO;
        for _ in 0..retries {
            let n = nominal.next_delay();
            let d = jittered.next_delay();
            prop_assert!(d <= n && n <= cap.max(first), "{d:?} above nominal {n:?} or cap");
            prop_assert!(d >= n / 2, "{d:?} below half of {n:?}");
            prop_assert!(n / 2 >= last_floor, "the floor shrank");
            last_floor = n / 2;
        }
    }

    #[test]
    fn after_a_reset_the_first_delay_comes_back(
        first_ms in 1u64..10_000,
        seed in any::<u64>(),
        failures in 1usize..20,
    ) {
        let first = Duration::from_millis(first_ms);
        let mut b = Backoff::new(first, first * 64).with_seed(seed);
        for _ in 0..failures {
            b.next_delay();
        }
        b.reset();
        let d = b.next_delay();
        prop_assert!(d <= first && d >= first / 2);
    }
}

#[test]
fn the_nominal_delay_reaches_the_cap_and_stays_there() {
    let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60)).with_seed(1);
    for _ in 0..10 {
        b.next_delay();
    }
    assert_eq!(b.nominal(), Duration::from_secs(60));
    for _ in 0..100 {
        let d = b.next_delay();
        assert!(
            d >= Duration::from_secs(30) && d <= Duration::from_secs(60),
            "{d:?}"
        );
    }
}
