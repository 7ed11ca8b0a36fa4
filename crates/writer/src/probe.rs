//! A health RPC under its deadline, counted and timed; what counts as a valid answer; and the
//! failure log that says once when a driver starts failing and once when it recovers.

use crate::metrics::WriterMetrics;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use volhealth_csi::v1::VolumeHealth;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;

/// The `method` label values of the four health RPCs.
pub mod method {
    /// ControllerListVolumeHealth.
    pub const LIST: &str = "ControllerListVolumeHealth";
    /// ControllerGetVolumeHealth.
    pub const GET: &str = "ControllerGetVolumeHealth";
    /// NodeGetVolumeHealth.
    pub const NODE_VOLUME: &str = "NodeGetVolumeHealth";
    /// NodeGetStorageHealth.
    pub const NODE_STORAGE: &str = "NodeGetStorageHealth";
}

/// A failed health RPC, or an answer that is not a valid one (never carries secrets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct ProbeError {
    /// The gRPC status code (`DeadlineExceeded` for our own deadline, `Internal` for a bad answer).
    pub code: tonic::Code,
    /// What went wrong.
    pub message: String,
}

impl ProbeError {
    /// An answer that arrived but breaks the CSI spec, so it is not taken as a report.
    pub fn bad_answer(message: impl Into<String>) -> ProbeError {
        ProbeError {
            code: tonic::Code::Internal,
            message: format!("invalid answer: {}", message.into()),
        }
    }

    /// Whether the error suggests the driver went away or changed (so capabilities are probed again).
    pub fn calls_for_reprobe(&self) -> bool {
        matches!(
            self.code,
            tonic::Code::Unavailable
                | tonic::Code::Unknown
                | tonic::Code::Cancelled
                | tonic::Code::Unimplemented
        )
    }
}

impl From<tonic::Status> for ProbeError {
    fn from(s: tonic::Status) -> Self {
        ProbeError {
            code: s.code(),
            message: s.message().to_string(),
        }
    }
}

/// Runs `fut` under `timeout`, recording `csi_volume_health_probe_total` and
/// `csi_volume_health_probe_duration_seconds`; a missed deadline is a `DeadlineExceeded` error.
pub async fn timed<T>(
    metrics: &WriterMetrics,
    driver: &str,
    method: &str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, ProbeError>>,
) -> Result<T, ProbeError> {
    let start = Instant::now();
    let result = match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(ProbeError {
            code: tonic::Code::DeadlineExceeded,
            message: format!(
                "no answer within {}",
                volhealth_daemon::duration::format(timeout)
            ),
        }),
    };
    metrics.probe(driver, method, result.is_ok(), start.elapsed());
    result
}

/// The entries of a ControllerGetVolumeHealth or NodeGetVolumeHealth answer about `volume_id`.
/// `volume_health` is REQUIRED and must name the volume asked about: an answer without it, or
/// about another volume, is an error, never "healthy".
pub fn volume_answer(
    volume_id: &str,
    volume_health: Option<VolumeHealth>,
) -> Result<Vec<VolumeHealthEntry>, ProbeError> {
    let Some(health) = volume_health else {
        return Err(ProbeError::bad_answer(
            "volume_health is missing (it is REQUIRED)",
        ));
    };
    if health.volume_id != volume_id {
        return Err(ProbeError::bad_answer(format!(
            "the answer is about volume {:?}, not {volume_id:?}",
            health.volume_id
        )));
    }
    Ok(health.health_statuses)
}

/// Says at WARN once when calls of one kind to one target start failing, and at INFO once when
/// they answer again, so a failing driver neither floods the log nor goes unmentioned.
#[derive(Debug, Default)]
pub struct FailureLog {
    failing: Mutex<HashSet<String>>,
}

impl FailureLog {
    /// An empty log (nothing failing).
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the outcome of one call for `target` (e.g. `"NodeGetVolumeHealth vol-1"`, or
    /// `format_args!` of it: the text is only made when a call fails or something is failing).
    pub fn note<T>(&self, target: impl std::fmt::Display, result: &Result<T, ProbeError>) {
        let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Err(e) => {
                let target = target.to_string();
                if failing.contains(&target) {
                    tracing::debug!(%target, error = %e, "health call still failing");
                } else {
                    tracing::warn!(%target, error = %e, "health call failed; keeping the stored health until it answers");
                    failing.insert(target);
                }
            }
            Ok(_) => {
                if !failing.is_empty() && failing.remove(&target.to_string()) {
                    tracing::info!(%target, "health call answers again");
                }
            }
        }
    }

    /// Whether calls for `target` are failing now.
    pub fn is_failing(&self, target: &str) -> bool {
        self.failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(target)
    }

    /// Forgets targets that no longer exist.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|t| keep(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_answer_about_the_volume_asked_is_a_report() {
        let vh = |id: &str| {
            Some(VolumeHealth {
                volume_id: id.into(),
                health_statuses: vec![],
            })
        };
        assert_eq!(volume_answer("v", vh("v")), Ok(vec![]));
        assert!(
            volume_answer("v", None)
                .unwrap_err()
                .message
                .contains("REQUIRED")
        );
        assert!(
            volume_answer("v", vh("w"))
                .unwrap_err()
                .message
                .contains("\"w\"")
        );
        assert!(volume_answer("v", vh("")).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_missed_deadline_is_an_error_and_counted() {
        let m = WriterMetrics::new(&mut prometheus_client::registry::Registry::default());
        let r: Result<(), _> = timed(&m, "d", method::GET, Duration::from_secs(1), async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        })
        .await;
        assert_eq!(r.unwrap_err().code, tonic::Code::DeadlineExceeded);
        assert_eq!(m.probe_count("d", method::GET, "error"), 1);
    }

    #[test]
    fn failures_are_tracked_per_target() {
        let log = FailureLog::new();
        let err: Result<(), ProbeError> = Err(ProbeError::bad_answer("x"));
        log.note("a", &err);
        log.note("a", &err);
        assert!(log.is_failing("a"));
        log.note("a", &Ok(()));
        assert!(!log.is_failing("a"));
    }
}
