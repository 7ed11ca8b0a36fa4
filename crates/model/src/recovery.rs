//! The list-mode recovery tracker for `ControllerListVolumeHealth`.
//!
//! Paged list results may repeat or omit volumes, so one absence is not a recovery. A volume
//! that is unhealthy in the API is cleared only after two consecutive *complete* list cycles
//! without it, or at once when a `ControllerGetVolumeHealth` call confirms it is healthy. A cycle
//! with a failed page counts for nothing. A volume listed with an empty `health_statuses` counts
//! as absent: it may be a stale duplicate from a shifted page.

use crate::{Report, VolumeHealthCondition, volume_report};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use volhealth_csi_proto::v1::VolumeHealth;
use volhealth_csi_proto::v1::volume_health::VolumeHealthEntry;

/// What to do with one volume after a list cycle.
#[derive(Debug, Clone, PartialEq)]
pub enum ListVerdict {
    /// Reported in this cycle: reconcile with this report.
    Report(Report<VolumeHealthCondition>),
    /// Absent once: confirm with `ControllerGetVolumeHealth`, then call [`ListRecovery::confirmed`].
    Confirm,
    /// Absent, but not long enough to clear: keep what is stored.
    Keep,
    /// Absent for two consecutive complete cycles, or confirmed healthy: clear.
    Clear,
}

/// Tracks list cycles and absences; one per monitored driver.
#[derive(Debug, Default)]
pub struct ListRecovery {
    /// Entries gathered by the cycle in progress; `None` when no cycle is open.
    cycle: Option<BTreeMap<String, Vec<VolumeHealthEntry>>>,
    /// Consecutive complete cycles in which an unhealthy volume was absent.
    absences: HashMap<String, u32>,
}

impl ListRecovery {
    /// A tracker with no history: every stored condition starts with zero absences.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a cycle, discarding any cycle left open.
    pub fn begin_cycle(&mut self) {
        self.cycle = Some(BTreeMap::new());
    }

    /// Adds one page. Entries for a volume seen on several pages are joined (union), so a
    /// condition reported on any page of the cycle is kept. A volume listed without conditions
    /// counts as absent, so it is not kept either: a healthy cycle of thousands of volumes holds
    /// nothing.
    pub fn page(&mut self, entries: &[VolumeHealth]) {
        let cycle = self.cycle.get_or_insert_with(BTreeMap::new);
        for vh in entries {
            if vh.health_statuses.is_empty() {
                continue;
            }
            cycle
                .entry(vh.volume_id.clone())
                .or_default()
                .extend(vh.health_statuses.iter().cloned());
        }
    }

    /// Drops the cycle in progress: a failed page or RPC makes the whole cycle count for nothing.
    pub fn abort_cycle(&mut self) {
        self.cycle = None;
    }

    /// Absences counted so far for a volume (for logs and tests).
    pub fn absences(&self, volume_id: &str) -> u32 {
        self.absences.get(volume_id).copied().unwrap_or(0)
    }

    /// Closes a complete cycle. `unhealthy_stored` holds the ids of volumes whose claim has
    /// conditions stored now. Returns a verdict for every volume reported in the cycle and every
    /// stored-unhealthy volume absent from it, sorted by volume id. Without an open cycle (none
    /// begun, or aborted) it returns nothing and counts nothing.
    pub fn complete_cycle(
        &mut self,
        unhealthy_stored: &BTreeSet<String>,
        get_available: bool,
    ) -> Vec<(String, ListVerdict)> {
        let Some(cycle) = self.cycle.take() else {
            return Vec::new();
        };
        let mut verdicts = BTreeMap::new();
        for (id, entries) in cycle {
            if entries.is_empty() {
                continue;
            }
            self.absences.remove(&id);
            verdicts.insert(id, ListVerdict::Report(volume_report(&entries)));
        }
        self.absences.retain(|id, _| unhealthy_stored.contains(id));
        for id in unhealthy_stored {
            if verdicts.contains_key(id) {
                continue;
            }
            let n = self.absences.entry(id.clone()).or_insert(0);
            *n += 1;
            // With Get, only a confirming answer clears: a failed confirmation is no recovery,
            // however often the volume is absent from the list.
            let verdict = if get_available {
                ListVerdict::Confirm
            } else if *n >= 2 {
                ListVerdict::Clear
            } else {
                ListVerdict::Keep
            };
            if verdict == ListVerdict::Clear {
                self.absences.remove(id);
            }
            verdicts.insert(id.clone(), verdict);
        }
        verdicts.into_iter().collect()
    }

    /// Takes the answer of a confirming `ControllerGetVolumeHealth` (`Err` when the call failed).
    /// Healthy → clear now; conditions → report them; failure → keep what is stored.
    pub fn confirmed(
        &mut self,
        volume_id: &str,
        result: Result<&[VolumeHealthEntry], ()>,
    ) -> ListVerdict {
        match result {
            Err(()) => ListVerdict::Keep,
            Ok([]) => {
                self.absences.remove(volume_id);
                ListVerdict::Clear
            }
            Ok(entries) => {
                self.absences.remove(volume_id);
                ListVerdict::Report(volume_report(entries))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vh(id: &str, statuses: &[(i32, &str)]) -> VolumeHealth {
        VolumeHealth {
            volume_id: id.into(),
            health_statuses: statuses
                .iter()
                .map(|(s, r)| VolumeHealthEntry {
                    status: *s,
                    reason: (*r).into(),
                    message: String::new(),
                })
                .collect(),
        }
    }

    fn stored(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    /// Completes the cycle with `v1` the one unhealthy volume stored.
    fn complete_v1(t: &mut ListRecovery, get_available: bool) -> Vec<(String, ListVerdict)> {
        t.complete_cycle(&stored(&["v1"]), get_available)
    }

    /// A tracker past one complete cycle that did not list `v1`, in the next cycle.
    fn one_absence_then_a_new_cycle() -> ListRecovery {
        let mut t = ListRecovery::new();
        t.begin_cycle();
        complete_v1(&mut t, false);
        t.begin_cycle();
        t
    }

    #[test]
    fn clears_after_two_complete_cycles_without_get() {
        let mut t = ListRecovery::new();
        t.begin_cycle();
        t.page(&[]);
        assert_eq!(
            complete_v1(&mut t, false),
            vec![("v1".into(), ListVerdict::Keep)]
        );
        t.begin_cycle();
        assert_eq!(
            complete_v1(&mut t, false),
            vec![("v1".into(), ListVerdict::Clear)]
        );
    }

    #[test]
    fn aborted_cycle_counts_for_nothing() {
        let mut t = one_absence_then_a_new_cycle();
        t.abort_cycle();
        assert!(complete_v1(&mut t, false).is_empty());
        assert_eq!(t.absences("v1"), 1);
    }

    #[test]
    fn reappearance_resets_the_count() {
        let mut t = one_absence_then_a_new_cycle();
        t.page(&[vh("v1", &[(2, "Gone")])]);
        let v = complete_v1(&mut t, false);
        assert!(matches!(v[0].1, ListVerdict::Report(_)));
        t.begin_cycle();
        assert_eq!(complete_v1(&mut t, false)[0].1, ListVerdict::Keep);
    }

    #[test]
    fn get_confirms_or_reports() {
        let mut t = ListRecovery::new();
        t.begin_cycle();
        assert_eq!(complete_v1(&mut t, true)[0].1, ListVerdict::Confirm);
        assert_eq!(t.confirmed("v1", Err(())), ListVerdict::Keep);
        assert_eq!(t.confirmed("v1", Ok(&[])), ListVerdict::Clear);
        let e = [VolumeHealthEntry {
            status: 1,
            reason: "Slow".into(),
            message: String::new(),
        }];
        assert!(matches!(t.confirmed("v1", Ok(&e)), ListVerdict::Report(_)));
    }

    #[test]
    fn with_get_a_failed_confirmation_never_clears() {
        let mut t = ListRecovery::new();
        for _ in 0..5 {
            t.begin_cycle();
            assert_eq!(complete_v1(&mut t, true)[0].1, ListVerdict::Confirm);
            assert_eq!(t.confirmed("v1", Err(())), ListVerdict::Keep);
        }
    }

    #[test]
    fn duplicates_across_pages_are_joined() {
        let mut t = ListRecovery::new();
        t.begin_cycle();
        t.page(&[vh("v1", &[(1, "Slow")])]);
        t.page(&[vh("v1", &[]), vh("v1", &[(2, "Gone")])]);
        match &t.complete_cycle(&stored(&[]), true)[0].1 {
            ListVerdict::Report(r) => assert_eq!(r.conditions.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn listed_with_empty_statuses_counts_as_absent() {
        let mut t = ListRecovery::new();
        t.begin_cycle();
        t.page(&[vh("v1", &[])]);
        assert_eq!(complete_v1(&mut t, false)[0].1, ListVerdict::Keep);
    }
}
