//! A service started with a captured log collects what every thread of its runtime logs, through
//! the filter it was given, and nothing from outside the service.

use volhealth_testkit::{CapturedLog, Service, WAIT, wait_for_blocking};

#[test]
fn a_logged_service_catches_its_own_threads_lines_through_its_filter() {
    let log = CapturedLog::new("info,captured_log=debug");
    tracing::info!("said outside the service");
    let service = Service::start_logged("logged", &log, |shutdown| async move {
        tracing::info!("said on the service thread");
        tokio::spawn(async { tracing::debug!(target: "captured_log", "said by a spawned task") })
            .await?;
        tokio::task::spawn_blocking(|| tracing::warn!("said on a blocking thread")).await?;
        tracing::debug!(target: "elsewhere", "filtered out");
        shutdown.await;
        Ok::<(), tokio::task::JoinError>(())
    });
    wait_for_blocking(WAIT, "the blocking thread's line", || {
        log.text().contains("blocking thread").then_some(())
    });
    service.stop().expect("the service stops cleanly");
    let text = log.text();
    for want in [
        "said on the service thread",
        "said by a spawned task",
        "said on a blocking thread",
    ] {
        assert!(text.contains(want), "{want:?} missing from {text}");
    }
    for unwanted in ["said outside the service", "filtered out", "\u{1b}["] {
        assert!(!text.contains(unwanted), "{unwanted:?} in {text}");
    }
}
