//! One ControllerListVolumeHealth cycle: every page under its own deadline, the two-cycle /
//! Get-confirm recovery rule, and nothing learned from an incomplete cycle.

use crate::claims::{BoundClaim, ClaimStore};
use crate::clock::Clock;
use crate::engine::{Engine, timed};
use crate::source::{HealthSource, ProbeError, method};
use crate::write_loop::lock;
use futures::StreamExt;
use std::collections::{BTreeSet, HashSet};
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_model::{ListVerdict, Report, VolumeHealthStatus};

impl<S: HealthSource, C: ClaimStore, K: Clock> Engine<S, C, K> {
    /// Runs one list cycle; returns whether it was complete.
    pub(crate) async fn list_cycle(&mut self, get_available: bool) -> bool {
        let driver = self.settings.driver_name.clone();
        let bound = self.claims.bound_claims(&driver);
        self.recovery.begin_cycle();
        let mut token = String::new();
        let mut tokens_seen = HashSet::new();
        let mut pages = 0usize;
        loop {
            let call = self
                .source
                .list_page(self.settings.page_size, token.clone());
            let page = timed(
                &self.shared.metrics,
                &driver,
                method::LIST,
                self.settings.timeout,
                call,
            )
            .await;
            match page {
                Err(e) => {
                    self.recovery.abort_cycle();
                    self.note_error(&e);
                    tracing::warn!(page = pages + 1, error = %e, "list page failed; this cycle counts for nothing and every stored condition stays");
                    return false;
                }
                Ok(p) => {
                    pages += 1;
                    self.recovery.page(&p.entries);
                    if p.next_token.is_empty() {
                        break;
                    }
                    if !tokens_seen.insert(p.next_token.clone()) {
                        self.recovery.abort_cycle();
                        tracing::warn!(
                            pages,
                            "the driver returned a list token it had already returned; abandoning this cycle"
                        );
                        return false;
                    }
                    token = p.next_token;
                }
            }
        }
        // Unhealthy = conditions stored, or about to be (a write still queued): an absence must be
        // able to cancel a queued write too, or it would land after the volume recovered.
        let has_conditions = |h: Option<VolumeHealthStatus>| {
            h.and_then(|h| h.health_conditions)
                .is_some_and(|cs| !cs.is_empty())
        };
        let unhealthy: BTreeSet<String> = {
            let mut s = lock(&self.shared.state);
            bound
                .values()
                .filter(|c| {
                    has_conditions(s.effective(&c.key, &c.stored))
                        || self
                            .shared
                            .queue
                            .pending(&c.key)
                            .is_some_and(|p| has_conditions(p.desired))
                })
                .map(|c| c.volume_id.clone())
                .collect()
        };
        let verdicts = self.recovery.complete_cycle(&unhealthy, get_available);
        let mut unmapped = Vec::new();
        let mut to_confirm = Vec::new();
        for (volume_id, verdict) in verdicts {
            let Some(claim) = bound.get(&volume_id) else {
                if matches!(verdict, ListVerdict::Report(_)) {
                    unmapped.push(volume_id);
                }
                continue;
            };
            match verdict {
                ListVerdict::Report(r) => self.apply(claim, &r),
                ListVerdict::Clear => self.apply(claim, &Report::healthy()),
                ListVerdict::Keep => {}
                ListVerdict::Confirm => to_confirm.push(claim.clone()),
            }
        }
        self.note_unmapped(&unmapped);
        self.confirm(to_confirm).await;
        true
    }

    /// Confirms absences with ControllerGetVolumeHealth, at most `workers` at once.
    async fn confirm(&mut self, claims: Vec<BoundClaim>) {
        if claims.is_empty() {
            return;
        }
        let (source, shared) = (self.source.clone(), self.shared.clone());
        let (driver, timeout) = (self.settings.driver_name.clone(), self.settings.timeout);
        let results: Vec<(BoundClaim, Result<Vec<VolumeHealthEntry>, ProbeError>)> =
            futures::stream::iter(claims)
                .map(|claim| {
                    let (source, shared, driver) = (source.clone(), shared.clone(), driver.clone());
                    async move {
                        let call = source.get(claim.volume_id.clone());
                        let r = timed(&shared.metrics, &driver, method::GET, timeout, call).await;
                        (claim, r)
                    }
                })
                .buffer_unordered(self.settings.workers)
                .collect()
                .await;
        for (claim, result) in results {
            if let Err(e) = &result {
                self.note_error(e);
                tracing::debug!(volume = %claim.volume_id, error = %e, "confirming Get failed; keeping the stored conditions");
            }
            let verdict = self
                .recovery
                .confirmed(&claim.volume_id, result.as_deref().map_err(|_| ()));
            match verdict {
                ListVerdict::Report(r) => self.apply(&claim, &r),
                ListVerdict::Clear => self.apply(&claim, &Report::healthy()),
                ListVerdict::Keep | ListVerdict::Confirm => {}
            }
        }
    }
}
