//! `stored + reported + now → what to write, or nothing`.
//!
//! The driver's report is authoritative: the stored list is replaced, not merged. Nothing is
//! written when the set of `(status, reason)` and every message are unchanged, whatever order the
//! stored list is in. `lastTransitionTime` moves only when the set of `(status, reason)` changes.
//! A report holding only values this version does not know changes nothing: such values are
//! surfaced by the caller and must never clear a stored condition.

use crate::api_time::api_time;
use crate::equality::{condition_key, same_conditions, same_keys};
use crate::{PodVolumeHealth, Report, StorageHealth, StorageHealthCondition, Timestamp};
use crate::{VolumeHealthCondition, VolumeHealthStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// What a writer must do to the stored value.
#[derive(Debug, Clone, PartialEq)]
pub enum Write<T> {
    /// Store this value.
    Set(T),
    /// Remove the field (or list entry): the driver reports no adverse condition.
    Remove,
}

impl<T> Write<T> {
    /// Applies the write to one entry of a list keyed by name (`pod.status.volumeHealth`,
    /// `csinode.status.storageHealth`): `position` is where the entry is now, if anywhere.
    pub fn apply_at(self, list: &mut Vec<T>, position: Option<usize>) {
        match (self, position) {
            (Write::Set(entry), Some(i)) => list[i] = entry,
            (Write::Set(entry), None) => list.push(entry),
            (Write::Remove, Some(i)) => {
                list.remove(i);
            }
            (Write::Remove, None) => {}
        }
    }
}

/// An entry of a list keyed by name (`pod.status.volumeHealth`, `csinode.status.storageHealth`).
pub trait NamedEntry {
    /// The entry's key: the `pod.spec.volumes` name or the driver name.
    fn entry_name(&self) -> &str;
}

impl NamedEntry for PodVolumeHealth {
    fn entry_name(&self) -> &str {
        &self.name
    }
}

impl NamedEntry for StorageHealth {
    fn entry_name(&self) -> &str {
        &self.name
    }
}

/// Reconciles one entry of a keyed list in place: `decide` gets the stored entry named `name`
/// (if any) and returns the write, if one is needed. Returns whether the list changed.
pub fn reconcile_entry<T: NamedEntry>(
    list: &mut Vec<T>,
    name: &str,
    decide: impl FnOnce(Option<&T>) -> Option<Write<T>>,
) -> bool {
    let position = list.iter().position(|e| e.entry_name() == name);
    match decide(position.map(|i| &list[i])) {
        Some(write) => {
            write.apply_at(list, position);
            true
        }
        None => false,
    }
}

/// Decides the write for a set of volume conditions with one shared transition time, given the
/// stored entry's `healthConditions` and `lastTransitionTime`; `entry` builds the entry written.
fn reconcile_volume_set<T>(
    stored: Option<(&Option<Vec<VolumeHealthCondition>>, &Option<Time>)>,
    report: &Report<VolumeHealthCondition>,
    now: Timestamp,
    entry: impl FnOnce(Vec<VolumeHealthCondition>, Time) -> T,
) -> Option<Write<T>> {
    let stored = stored.map(|(conds, ltt)| (conds.as_deref().unwrap_or_default(), ltt.as_ref()));
    if report.conditions.is_empty() {
        if !report.unknown.is_empty() {
            return None;
        }
        return stored.map(|_| Write::Remove);
    }
    let desired = &report.conditions;
    let since = match stored {
        Some((conds, ltt)) => {
            if same_conditions(conds, desired) {
                return None;
            }
            match ltt {
                Some(t) if same_keys(conds, desired) => t.clone(),
                _ => Time(api_time(now)),
            }
        }
        None => Time(api_time(now)),
    };
    Some(Write::Set(entry(desired.clone(), since)))
}

/// The conditions of a claim's `status.healthStatus`: none when it has no `healthStatus` or one
/// without conditions, which mean the same.
pub fn claim_conditions(health: Option<&VolumeHealthStatus>) -> &[VolumeHealthCondition] {
    health
        .and_then(|h| h.health_conditions.as_deref())
        .unwrap_or_default()
}

/// `pvc.status.healthStatus`: `None` means nothing to write.
pub fn reconcile_pvc(
    stored: Option<&VolumeHealthStatus>,
    report: &Report<VolumeHealthCondition>,
    now: Timestamp,
) -> Option<Write<VolumeHealthStatus>> {
    let stored = stored.map(|s| (&s.health_conditions, &s.last_transition_time));
    reconcile_volume_set(stored, report, now, |conds, since| VolumeHealthStatus {
        health_conditions: Some(conds),
        last_transition_time: Some(since),
    })
}

/// One `pod.status.volumeHealth` entry, keyed by the `pod.spec.volumes` name.
pub fn reconcile_pod_volume(
    stored: Option<&PodVolumeHealth>,
    volume_name: &str,
    report: &Report<VolumeHealthCondition>,
    now: Timestamp,
) -> Option<Write<PodVolumeHealth>> {
    let stored = stored.map(|s| (&s.health_conditions, &s.last_transition_time));
    reconcile_volume_set(stored, report, now, |conds, since| PodVolumeHealth {
        name: volume_name.to_string(),
        health_conditions: Some(conds),
        last_transition_time: Some(since),
    })
}

/// One driver's `csinode.status.storageHealth` entry. Each condition keeps its own
/// `lastTransitionTime` while its `(status, reason)` is stored; a change of its access or volume
/// mode alone is written but keeps the time.
pub fn reconcile_storage(
    stored: Option<&StorageHealth>,
    driver_name: &str,
    report: &Report<StorageHealthCondition>,
    now: Timestamp,
) -> Option<Write<StorageHealth>> {
    let stored_conds = stored.map(|s| s.health_conditions.as_deref().unwrap_or_default());
    if report.conditions.is_empty() {
        if !report.unknown.is_empty() {
            return None;
        }
        return stored.map(|_| Write::Remove);
    }
    if let Some(conds) = stored_conds
        && same_conditions(conds, &report.conditions)
    {
        return None;
    }
    let conditions = report
        .conditions
        .iter()
        .map(|c| {
            let since = stored_conds
                .and_then(|conds| conds.iter().find(|s| condition_key(*s) == condition_key(c)))
                .and_then(|s| s.last_transition_time.clone())
                .unwrap_or(Time(api_time(now)));
            StorageHealthCondition {
                last_transition_time: Some(since),
                ..c.clone()
            }
        })
        .collect();
    Some(Write::Set(StorageHealth {
        name: driver_name.to_string(),
        health_conditions: Some(conditions),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::conditions::storage_condition;
    use crate::volume_report;
    use volhealth_csi_proto::v1::volume_health::VolumeHealthEntry;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn report(entries: &[(i32, &str, &str)]) -> Report<VolumeHealthCondition> {
        let e: Vec<_> = entries
            .iter()
            .map(|(s, r, m)| VolumeHealthEntry {
                status: *s,
                reason: (*r).into(),
                message: (*m).into(),
            })
            .collect();
        volume_report(&e)
    }

    fn set(w: Option<Write<VolumeHealthStatus>>) -> VolumeHealthStatus {
        match w {
            Some(Write::Set(v)) => v,
            other => panic!("expected a Set, got {other:?}"),
        }
    }

    #[test]
    fn first_report_writes_with_now() {
        let s = set(reconcile_pvc(
            None,
            &report(&[(2, "VolumeNotFound", "gone")]),
            t(100),
        ));
        assert_eq!(s.last_transition_time, Some(Time(t(100))));
        assert_eq!(s.health_conditions.unwrap()[0].status, "Inaccessible");
    }

    #[test]
    fn unchanged_writes_nothing_and_message_change_keeps_time() {
        let r1 = report(&[(1, "SlowIo", "40ms")]);
        let s = set(reconcile_pvc(None, &r1, t(100)));
        assert_eq!(reconcile_pvc(Some(&s), &r1, t(200)), None);
        let s2 = set(reconcile_pvc(
            Some(&s),
            &report(&[(1, "SlowIo", "90ms")]),
            t(200),
        ));
        assert_eq!(s2.last_transition_time, Some(Time(t(100))));
        let s3 = set(reconcile_pvc(
            Some(&s2),
            &report(&[(1, "SlowIo", "90ms"), (3, "Fsck", "")]),
            t(300),
        ));
        assert_eq!(s3.last_transition_time, Some(Time(t(300))));
    }

    #[test]
    fn stored_order_does_not_matter() {
        let r = report(&[(1, "A", ""), (2, "B", "")]);
        let mut s = set(reconcile_pvc(None, &r, t(1)));
        s.health_conditions.as_mut().unwrap().reverse();
        assert_eq!(reconcile_pvc(Some(&s), &r, t(2)), None);
    }

    #[test]
    fn empty_report_clears_and_unknown_only_keeps() {
        let s = set(reconcile_pvc(None, &report(&[(2, "X", "")]), t(1)));
        assert_eq!(
            reconcile_pvc(Some(&s), &report(&[(77, "Future", "")]), t(2)),
            None
        );
        assert_eq!(
            reconcile_pvc(Some(&s), &Report::healthy(), t(2)),
            Some(Write::Remove)
        );
        assert_eq!(reconcile_pvc(None, &Report::healthy(), t(2)), None);
    }

    #[test]
    fn writes_apply_to_keyed_lists() {
        let mut list = vec!["a", "b"];
        Write::Set("B").apply_at(&mut list, Some(1));
        Write::Set("c").apply_at(&mut list, None);
        Write::Remove.apply_at(&mut list, Some(0));
        Write::<&str>::Remove.apply_at(&mut list, None);
        assert_eq!(list, vec!["B", "c"]);
    }

    #[test]
    fn pod_volume_entry_carries_name() {
        match reconcile_pod_volume(None, "data", &report(&[(3, "Corrupt", "")]), t(5)) {
            Some(Write::Set(p)) => assert_eq!(p.name, "data"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn transition_times_are_whole_seconds_whatever_the_clock() {
        let now = Timestamp::from_millisecond(1_700_000_000_750).unwrap();
        let s = set(reconcile_pvc(None, &report(&[(2, "Gone", "")]), now));
        assert_eq!(
            s.last_transition_time,
            Some(Time(Timestamp::from_second(1_700_000_000).unwrap()))
        );
    }

    #[test]
    fn a_storage_scope_change_is_written_and_keeps_the_time() {
        let scoped = storage_condition("StorageDegraded", "PathDown", Some("ReadWriteMany"));
        let r = |c: &StorageHealthCondition| Report {
            conditions: vec![c.clone()],
            unknown: vec![],
            fixes: vec![],
        };
        let first = match reconcile_storage(None, "d", &r(&scoped), t(10)) {
            Some(Write::Set(s)) => s,
            other => panic!("{other:?}"),
        };
        let widened = StorageHealthCondition {
            access_mode: None,
            ..scoped
        };
        let second = match reconcile_storage(Some(&first), "d", &r(&widened), t(20)) {
            Some(Write::Set(s)) => s,
            other => panic!("{other:?}"),
        };
        let c = &second.health_conditions.unwrap()[0];
        assert_eq!(c.access_mode, None);
        assert_eq!(c.last_transition_time, Some(Time(t(10))));
    }

    #[test]
    fn keyed_entries_are_reconciled_in_place() {
        let mut list: Vec<PodVolumeHealth> = Vec::new();
        let bad = report(&[(2, "Gone", "")]);
        assert!(reconcile_entry(
            &mut list,
            "data",
            |e| reconcile_pod_volume(e, "data", &bad, t(1))
        ));
        assert!(!reconcile_entry(&mut list, "data", |e| {
            reconcile_pod_volume(e, "data", &bad, t(2))
        }));
        assert!(reconcile_entry(&mut list, "data", |e| {
            reconcile_pod_volume(e, "data", &Report::healthy(), t(3))
        }));
        assert!(list.is_empty());
    }

    #[test]
    fn storage_keeps_per_condition_time() {
        let a = storage_condition("StorageDegraded", "Slow", None);
        let b = storage_condition("StorageUnreachable", "Partition", None);
        let r1 = Report {
            conditions: vec![a.clone()],
            unknown: vec![],
            fixes: vec![],
        };
        let first = match reconcile_storage(None, "d", &r1, t(10)) {
            Some(Write::Set(s)) => s,
            other => panic!("{other:?}"),
        };
        assert_eq!(reconcile_storage(Some(&first), "d", &r1, t(20)), None);
        let r2 = Report {
            conditions: vec![b, a],
            unknown: vec![],
            fixes: vec![],
        };
        let second = match reconcile_storage(Some(&first), "d", &r2, t(30)) {
            Some(Write::Set(s)) => s,
            other => panic!("{other:?}"),
        };
        let conds = second.health_conditions.unwrap();
        let slow = conds.iter().find(|c| c.reason == "Slow").unwrap();
        let part = conds.iter().find(|c| c.reason == "Partition").unwrap();
        assert_eq!(slow.last_transition_time, Some(Time(t(10))));
        assert_eq!(part.last_transition_time, Some(Time(t(30))));
    }
}
