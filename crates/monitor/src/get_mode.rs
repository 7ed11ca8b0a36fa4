//! One ControllerGetVolumeHealth cycle: every bound volume exactly once, the calls spread evenly
//! over the interval, at most `workers` in flight.

use crate::claims::BoundClaim;
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::source::{HealthSource, ProbeError, method};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_model::volume_report;
use volhealth_writer::pacing::Pacer;
use volhealth_writer::timed;

type Answer<'a> = (&'a BoundClaim, Result<Vec<VolumeHealthEntry>, ProbeError>);

async fn probe<'a>(
    source: Arc<dyn HealthSource>,
    metrics: Arc<Metrics>,
    driver: &str,
    timeout: Duration,
    claim: &'a BoundClaim,
) -> Answer<'a> {
    let call = source.get(claim.volume_id.clone());
    let r = timed(&metrics.writer, driver, method::GET, timeout, call).await;
    (claim, r)
}

impl Engine {
    /// Runs one Get cycle that started at `start`, over the claims `bound` then; volumes bound
    /// later wait for the next cycle.
    pub(crate) async fn get_cycle(&mut self, bound: &BTreeMap<String, BoundClaim>, start: Instant) {
        let driver = self.settings.driver_name.clone();
        let n = bound.len();
        // Each call borrows its claim: a sweep copies none of them.
        let mut claims = bound.values();
        if n == 0 {
            return;
        }
        let pacer = Pacer::new(start, self.settings.interval, n);
        let workers = self.settings.workers.max(1);
        let mut inflight = FuturesUnordered::new();
        let mut launched = 0usize;
        let mut errors = 0usize;
        let mut last_error = None;
        loop {
            let due = pacer.due(launched);
            tokio::select! {
                biased;
                Some(answer) = inflight.next(), if !inflight.is_empty() => {
                    let (claim, result): Answer<'_> = answer;
                    self.failures.note(format_args!("{} {}", method::GET, claim.volume_id), &result);
                    match result {
                        Ok(entries) => self.apply(claim, volume_report(&entries)),
                        Err(e) => {
                            self.note_error(&e);
                            errors += 1;
                            last_error = Some(e);
                        }
                    }
                }
                _ = tokio::time::sleep_until(due), if launched < n && inflight.len() < workers => {
                    launched += 1;
                    if let Some(claim) = claims.next() {
                        inflight.push(probe(self.source.clone(), self.shared.metrics.clone(), &driver, self.settings.timeout, claim));
                    }
                }
                else => break,
            }
        }
        if let Some(e) = last_error {
            tracing::debug!(failed = errors, of = n, last_error = %e, "ControllerGetVolumeHealth failed for some volumes; keeping their stored conditions");
        }
    }
}

/// The reason reported for a claim its storage system marks `inaccessible`.
pub const ANNOTATION_REASON: &str = "VolumeInaccessible";

/// What a claim's health annotation reports: `inaccessible` is one condition, `accessible` is
/// healthy, anything else (or none) says nothing.
pub fn annotation_entries(value: Option<&str>) -> Option<Vec<VolumeHealthEntry>> {
    match value?.trim() {
        "inaccessible" => Some(vec![VolumeHealthEntry {
            status: volhealth_csi::v1::VolumeHealthErrorType::Inaccessible as i32,
            reason: ANNOTATION_REASON.to_string(),
            message: format!(
                "the storage system marks the volume inaccessible ({} = inaccessible)",
                crate::watched::HEALTH_ANNOTATION
            ),
        }]),
        "accessible" => Some(Vec::new()),
        _ => None,
    }
}

impl Engine {
    /// One annotation cycle: each bound claim's health annotation, read from the cache (no call
    /// to anything); a claim without one, or with a value other than the two known, keeps what
    /// is stored.
    pub(crate) fn annotation_cycle(&mut self, bound: &BTreeMap<String, BoundClaim>) {
        for claim in bound.values() {
            if let Some(entries) = annotation_entries(claim.stored.health_annotation.as_deref()) {
                self.apply(claim, volume_report(&entries));
            }
        }
    }
}

#[cfg(test)]
mod annotation_tests {
    use super::*;

    #[test]
    fn the_two_values_report_and_anything_else_says_nothing() {
        let down = annotation_entries(Some("inaccessible")).unwrap();
        assert_eq!(down.len(), 1);
        assert_eq!(down[0].reason, ANNOTATION_REASON);
        assert_eq!(
            down[0].status,
            volhealth_csi::v1::VolumeHealthErrorType::Inaccessible as i32
        );
        assert_eq!(annotation_entries(Some("accessible")), Some(Vec::new()));
        assert_eq!(annotation_entries(Some(" accessible ")), Some(Vec::new()));
        for silent in [None, Some(""), Some("unknown"), Some("Inaccessible?")] {
            assert_eq!(annotation_entries(silent), None, "{silent:?}");
        }
    }
}
