//! The signals that stop a long-running component: SIGINT (Ctrl-C) and SIGTERM (what the kubelet sends).
//!
//! A component's orderly shutdown can hang on what it is waiting for (a CSI call to a hung
//! driver, a slow API server). Once a signal arrived, a watchdog ends the process after
//! [`GRACE`] anyway, logging what was still in progress (see [`crate::in_progress`]).

use std::future::Future;
use std::time::Duration;

pub use crate::in_progress::{InProgress, in_progress, pending};

/// How long an orderly shutdown may take before the process exits regardless.
pub const GRACE: Duration = Duration::from_millis(1500);

/// Starts the watchdog: after `grace`, logs what was still in progress and exits with status 0.
pub fn exit_after(grace: Duration) {
    let spawned = std::thread::Builder::new()
        .name("shutdown-watchdog".into())
        .spawn(move || {
            std::thread::sleep(grace);
            let what = crate::in_progress::describe();
            tracing::warn!("shutdown took longer than {grace:?}; exiting anyway, cut off while waiting for: {what}");
            eprintln!("shutdown took longer than {grace:?}; exiting anyway, cut off while waiting for: {what}");
            std::process::exit(0);
        });
    if let Err(e) = spawned {
        tracing::warn!("starting the shutdown watchdog: {e}");
    }
}

/// Watches for SIGINT and SIGTERM from now on and returns a future that completes at the first.
///
/// At the signal, a task of its own logs that the component is shutting down and what it is
/// waiting for, and starts the watchdog that ends the process [`GRACE`] later if it has not
/// ended by then; so the process ends even when nothing polls the returned future yet (a
/// component still stuck in its start-up). Must be called within a tokio runtime.
///
/// If SIGTERM cannot be watched (no signal handling available), only SIGINT stops the wait.
pub fn sigint_or_sigterm() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    let (arrived, stop) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let int = async {
            match interrupt.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let term = async {
            match terminate.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = int => {}
            _ = term => {}
        }
        tracing::info!(
            "shutting down; waiting for: {}",
            crate::in_progress::describe()
        );
        exit_after(GRACE);
        let _ = arrived.send(());
    });
    async move {
        let _ = stop.await;
    }
}
