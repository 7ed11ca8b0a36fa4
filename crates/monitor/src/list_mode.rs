//! One ControllerListVolumeHealth cycle: every page under its own deadline, the cycle bounded in
//! pages and in time, the two-cycle / Get-confirm recovery rule, and nothing learned from an
//! incomplete cycle.

use crate::claims::BoundClaim;
use crate::engine::{Engine, has_conditions};
use crate::source::{ProbeError, method};
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;
use tokio::time::Instant;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_model::{ListVerdict, Report};
use volhealth_writer::timed;

/// Pages allowed beyond what the known volumes need (drivers may list healthy volumes too).
const EXTRA_PAGES: usize = 10;

/// Most pages a cycle may take: twice what listing `known` volumes needs, plus a margin.
pub fn page_limit(known: usize, page_size: i32) -> usize {
    let page = usize::try_from(page_size).unwrap_or(0).max(1);
    known
        .div_ceil(page)
        .saturating_mul(2)
        .saturating_add(EXTRA_PAGES)
}

/// Longest a cycle may take: two intervals, or four page deadlines when those are longer.
pub fn time_limit(interval: Duration, timeout: Duration) -> Duration {
    (interval * 2).max(timeout * 4)
}

impl Engine {
    fn cut_short(&mut self, reason: &str, pages: usize, why: &str) -> bool {
        self.recovery.abort_cycle();
        self.shared.metrics.incomplete_cycle(reason);
        tracing::warn!(
            pages,
            "{why}; this cycle counts for nothing and every stored condition stays"
        );
        false
    }

    /// Runs one list cycle over the claims `bound` when it started at `start`; returns whether
    /// it was complete.
    pub(crate) async fn list_cycle(
        &mut self,
        bound: &BTreeMap<String, BoundClaim>,
        get_available: bool,
        start: Instant,
    ) -> bool {
        let driver = self.settings.driver_name.clone();
        let max_pages = page_limit(
            bound.len().max(self.last_complete_listed),
            self.settings.page_size,
        );
        let deadline = start + time_limit(self.settings.interval, self.settings.timeout);
        self.recovery.begin_cycle();
        let mut token = String::new();
        let mut tokens_seen = HashSet::new();
        let mut pages = 0usize;
        let mut listed = 0usize;
        loop {
            if pages >= max_pages {
                return self.cut_short(
                    "too_many_pages",
                    pages,
                    &format!("the driver kept returning list tokens beyond {max_pages} pages"),
                );
            }
            let call = self
                .source
                .list_page(self.settings.page_size, token.clone());
            let page = timed(
                &self.shared.metrics.writer,
                &driver,
                method::LIST,
                self.settings.timeout,
                call,
            );
            let page = tokio::select! {
                p = page => p,
                _ = tokio::time::sleep_until(deadline) => {
                    return self.cut_short("too_long", pages, "the list cycle ran past its time limit");
                }
            };
            self.failures.note(method::LIST, &page);
            match page {
                Err(e) => {
                    self.note_error(&e);
                    return self.cut_short(
                        "page_failed",
                        pages,
                        &format!("list page {} failed: {e}", pages + 1),
                    );
                }
                Ok(p) => {
                    pages += 1;
                    listed += p.entries.len();
                    self.recovery.page(&p.entries);
                    if p.next_token.is_empty() {
                        break;
                    }
                    if !tokens_seen.insert(p.next_token.clone()) {
                        return self.cut_short(
                            "token_repeated",
                            pages,
                            "the driver returned a list token it had already returned",
                        );
                    }
                    token = p.next_token;
                }
            }
        }
        self.last_complete_listed = listed;
        // Unhealthy = conditions stored (unless a clear is already queued: it needs no second
        // confirmation), or about to be (a write still queued): an absence must be able to cancel
        // a queued write too, or it would land after the volume recovered.
        let unhealthy: BTreeSet<String> = bound
            .values()
            .filter(|c| {
                let pending = self.shared.offers.pending(&c.key);
                match pending {
                    Some(p) => !p.conditions.is_empty(),
                    None => has_conditions(&self.shared.effective(&c.key, &c.stored)),
                }
            })
            .map(|c| c.volume_id.clone())
            .collect();
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
                ListVerdict::Report(r) => self.apply(claim, r),
                ListVerdict::Clear => self.apply(claim, Report::healthy()),
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
        let (source, metrics) = (self.source.clone(), self.shared.metrics.clone());
        let (driver, timeout) = (self.settings.driver_name.clone(), self.settings.timeout);
        let results: Vec<(BoundClaim, Result<Vec<VolumeHealthEntry>, ProbeError>)> =
            futures::stream::iter(claims)
                .map(|claim| {
                    let (source, metrics, driver) =
                        (source.clone(), metrics.clone(), driver.clone());
                    async move {
                        let call = source.get(claim.volume_id.clone());
                        let r = timed(&metrics.writer, &driver, method::GET, timeout, call).await;
                        (claim, r)
                    }
                })
                .buffer_unordered(self.settings.workers)
                .collect()
                .await;
        for (claim, result) in results {
            self.failures
                .note(format_args!("{} {}", method::GET, claim.volume_id), &result);
            if let Err(e) = &result {
                self.note_error(e);
            }
            let verdict = self
                .recovery
                .confirmed(&claim.volume_id, result.as_deref().map_err(|_| ()));
            match verdict {
                ListVerdict::Report(r) => self.apply(&claim, r),
                ListVerdict::Clear => self.apply(&claim, Report::healthy()),
                ListVerdict::Keep | ListVerdict::Confirm => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_grow_with_the_known_volumes() {
        assert_eq!(page_limit(0, 500), EXTRA_PAGES);
        assert_eq!(page_limit(5000, 500), 20 + EXTRA_PAGES);
        assert_eq!(
            page_limit(10, 0),
            20 + EXTRA_PAGES,
            "a page size of 0 counts as 1"
        );
        assert_eq!(
            time_limit(Duration::from_secs(60), Duration::from_secs(15)),
            Duration::from_secs(120)
        );
        assert_eq!(
            time_limit(Duration::from_secs(1), Duration::from_secs(15)),
            Duration::from_secs(60)
        );
    }
}
