//! A token bucket for `--kube-api-qps` / `--kube-api-burst` (kube-rs has no client-side limiter).

use std::time::Duration;
use tokio::time::Instant;

/// Allows `burst` requests at once and `qps` per second sustained.
#[derive(Debug)]
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            qps: if qps > 0.0 { qps } else { 1.0 },
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    fn refill(&mut self) {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
    }

    /// Waits until a request may go out, and takes its token.
    pub async fn acquire(&mut self) {
        self.refill();
        if self.tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - self.tokens) / self.qps);
            tokio::time::sleep(wait).await;
            self.refill();
        }
        self.tokens = (self.tokens - 1.0).max(0.0);
    }

    /// Takes the next token now, though it may not be there yet, and says when it is due: the
    /// request may go out then. A caller that waits for it elsewhere (in a select with other
    /// work) can do so without holding the limiter. Later reservations queue up behind it.
    pub fn reserve(&mut self) -> Instant {
        self.refill();
        let wait = if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / self.qps)
        };
        self.tokens -= 1.0;
        self.last + wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_then_sustained_rate() {
        let mut l = RateLimiter::new(5.0, 10);
        let start = Instant::now();
        for _ in 0..10 {
            l.acquire().await;
        }
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "the burst goes out at once"
        );
        for _ in 0..5 {
            l.acquire().await;
        }
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(990) && took <= Duration::from_millis(1010),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn reservations_are_due_as_acquiring_would_return() {
        let mut l = RateLimiter::new(5.0, 2);
        let start = Instant::now();
        assert_eq!(l.reserve(), start, "the burst is due at once");
        assert_eq!(l.reserve(), start);
        let third = l.reserve();
        let fourth = l.reserve();
        assert_eq!(third - start, Duration::from_millis(200));
        assert_eq!(
            fourth - start,
            Duration::from_millis(400),
            "queued behind the third"
        );
        tokio::time::sleep_until(fourth).await;
        let fifth = l.reserve();
        assert_eq!(
            fifth - start,
            Duration::from_millis(600),
            "no token saved up meanwhile"
        );
    }
}
