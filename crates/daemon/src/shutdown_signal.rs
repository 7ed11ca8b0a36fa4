//! The signals that stop a long-running component: SIGINT (Ctrl-C) and SIGTERM (what the kubelet sends).
//!
//! A component's orderly shutdown can hang on what it is waiting for (a CSI call to a hung
//! driver, a slow API server). Once a signal arrived, a watchdog ends the process after
//! [`GRACE`] anyway, logging what was still in progress (see [`in_progress`]).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long an orderly shutdown may take before the process exits regardless.
pub const GRACE: Duration = Duration::from_millis(1500);

static NEXT: AtomicU64 = AtomicU64::new(0);
static IN_PROGRESS: Mutex<BTreeMap<u64, String>> = Mutex::new(BTreeMap::new());

/// Marks `what` as in progress until the guard is dropped, so a cut-off shutdown can name it.
pub fn in_progress(what: impl Into<String>) -> InProgress {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut m) = IN_PROGRESS.lock() {
        m.insert(id, what.into());
    }
    InProgress(id)
}

/// Guard of [`in_progress`].
#[derive(Debug)]
pub struct InProgress(u64);

impl Drop for InProgress {
    fn drop(&mut self) {
        if let Ok(mut m) = IN_PROGRESS.lock() {
            m.remove(&self.0);
        }
    }
}

/// What is in progress now, in start order.
pub fn pending() -> Vec<String> {
    IN_PROGRESS
        .lock()
        .map(|m| m.values().cloned().collect())
        .unwrap_or_default()
}

/// Starts the watchdog: after `grace`, logs what was still in progress and exits with status 0.
pub fn exit_after(grace: Duration) {
    let spawned = std::thread::Builder::new()
        .name("shutdown-watchdog".into())
        .spawn(move || {
            std::thread::sleep(grace);
            let pending = pending();
            let what = if pending.is_empty() {
                "the run loop to finish".to_string()
            } else {
                pending.join(", ")
            };
            tracing::warn!("shutdown took longer than {grace:?}; exiting anyway, cut off while waiting for: {what}");
            eprintln!("shutdown took longer than {grace:?}; exiting anyway, cut off while waiting for: {what}");
            std::process::exit(0);
        });
    if let Err(e) = spawned {
        tracing::warn!("starting the shutdown watchdog: {e}");
    }
}

/// Completes at the first SIGINT or SIGTERM, logs that the component is shutting down, and
/// starts the watchdog that ends the process [`GRACE`] later if it has not ended by then.
///
/// If SIGTERM cannot be watched (no signal handling available), only SIGINT stops the wait.
pub async fn sigint_or_sigterm() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    tracing::info!("shutting down");
    exit_after(GRACE);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_progress_is_listed_until_dropped() {
        let a = in_progress("CSI call ControllerListVolumes");
        let b = in_progress("watch of pods");
        assert!(pending().contains(&"CSI call ControllerListVolumes".to_string()));
        drop(a);
        let now = pending();
        assert!(!now.contains(&"CSI call ControllerListVolumes".to_string()));
        assert!(now.contains(&"watch of pods".to_string()));
        drop(b);
    }
}
