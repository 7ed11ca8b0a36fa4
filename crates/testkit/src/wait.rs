//! Waiting on a condition with a deadline, never a fixed sleep: the one polling loop of the
//! tests, for async tests and for tests without a runtime.

use std::time::{Duration, Instant};

/// How often a condition is checked again.
const POLL: Duration = Duration::from_millis(100);

/// Polls `check` until it returns `Some`, or panics naming `what` after `timeout`.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`wait_for`] for a check that answers yes or no.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_for(timeout, what, || {
        let done = check();
        async move { done.await.then_some(()) }
    })
    .await;
}

/// [`wait_for`] for a test without a runtime (or a check that blocks): the thread parks between
/// checks.
pub fn wait_for_blocking<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::park_timeout(POLL);
    }
}

/// A current-thread runtime with I/O and timers, for a test without one that calls async code.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Runs `f` to completion on a [`runtime`] of its own.
pub fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    runtime().block_on(f)
}
