//! The three health fields the writers store, and how a driver's report changes each: the KEP's
//! rules (from `volhealth_model::reconcile`) applied in one place, with the write's place in the
//! queue decided in the same pass.
//!
//! - `pvc.status.healthStatus`: `Option<VolumeHealthStatus>`, one report per claim.
//! - `pod.status.volumeHealth`: `Vec<PodVolumeHealth>`, one report per pod volume, in the order
//!   of `pod.spec.volumes`.
//! - `csinode.status.storageHealth`: `Vec<StorageHealth>`, one report per driver, by name.

use std::collections::BTreeMap;
use volhealth_model::sanitize::Condition;
use volhealth_model::{
    NamedEntry, PodVolumeHealth, Report, StorageHealth, StorageHealthCondition, Timestamp,
    VolumeHealthCondition, VolumeHealthStatus, Write, reconcile_entry, reconcile_pod_volume,
    reconcile_pvc, reconcile_storage,
};

/// What a report makes of a stored value.
#[derive(Debug, Clone, PartialEq)]
pub struct Change<V> {
    /// The value to store.
    pub value: V,
    /// Its place in the write queue: the most severe report among those that change something
    /// (the model's order, 0 first); recoveries go last.
    pub priority: usize,
}

/// A health field of an object, and what a driver's report does to it.
pub trait HealthField: Clone + Send + Sync + 'static {
    /// What a probe cycle hands over for one object.
    type Report: Clone + Send + Sync + 'static;

    /// The value to store over `self` for `report` at `now`, and its place in line; `None` when
    /// nothing would change.
    fn reconcile(&self, report: &Self::Report, now: Timestamp) -> Option<Change<Self>>;

    /// Adds `older` (a report still waiting to be written) under `newer`: for a field with one
    /// report per entry, an entry the newer report does not speak of keeps the older report.
    fn merge(newer: &mut Self::Report, older: Self::Report);

    /// Whether the value holds no condition at all.
    fn is_empty(&self) -> bool;
}

/// `pvc.status.healthStatus`: `None` when the claim has no health field.
impl HealthField for Option<VolumeHealthStatus> {
    type Report = Report<VolumeHealthCondition>;

    fn reconcile(&self, report: &Self::Report, now: Timestamp) -> Option<Change<Self>> {
        let value = match reconcile_pvc(self.as_ref(), report, now)? {
            Write::Set(h) => Some(h),
            Write::Remove => None,
        };
        Some(Change {
            value,
            priority: report.severity(),
        })
    }

    /// One report speaks for the whole claim: the newer stands.
    fn merge(_newer: &mut Self::Report, _older: Self::Report) {}

    fn is_empty(&self) -> bool {
        self.as_ref()
            .and_then(|h| h.health_conditions.as_ref())
            .is_none_or(|c| c.is_empty())
    }
}

/// The reports for a list keyed by name (`pod.status.volumeHealth`,
/// `csinode.status.storageHealth`): the latest report of each entry probed.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryReports<C> {
    /// Entry name (pod volume, or driver) → its latest report.
    pub entries: BTreeMap<String, Report<C>>,
    /// The order the stored list follows (the names of `pod.spec.volumes`); empty: by name.
    pub order: Vec<String>,
}

impl<C> Default for EntryReports<C> {
    fn default() -> Self {
        EntryReports {
            entries: BTreeMap::new(),
            order: Vec::new(),
        }
    }
}

/// Applies every entry's report to `before` in one pass: the new list and the most severe
/// report that changed its entry, or `None` when no entry changes.
fn reconcile_list<E: NamedEntry + Clone, C: Condition>(
    before: &[E],
    reports: &EntryReports<C>,
    decide: impl Fn(Option<&E>, &str, &Report<C>) -> Option<Write<E>>,
) -> Option<Change<Vec<E>>> {
    let mut list = before.to_vec();
    let mut priority = None::<usize>;
    for (name, report) in &reports.entries {
        if reconcile_entry(&mut list, name, |stored| decide(stored, name, report)) {
            let severity = report.severity();
            priority = Some(priority.map_or(severity, |p| p.min(severity)));
        }
    }
    let priority = priority?;
    if reports.order.is_empty() {
        list.sort_by(|a, b| a.entry_name().cmp(b.entry_name()));
    } else {
        list.sort_by_key(|e| {
            reports
                .order
                .iter()
                .position(|n| n == e.entry_name())
                .unwrap_or(usize::MAX)
        });
    }
    Some(Change {
        value: list,
        priority,
    })
}

fn merge_entries<C>(newer: &mut EntryReports<C>, older: EntryReports<C>) {
    for (name, report) in older.entries {
        newer.entries.entry(name).or_insert(report);
    }
    if newer.order.is_empty() {
        newer.order = older.order;
    }
}

/// `pod.status.volumeHealth`, keyed by the `pod.spec.volumes` name.
impl HealthField for Vec<PodVolumeHealth> {
    type Report = EntryReports<VolumeHealthCondition>;

    fn reconcile(&self, report: &Self::Report, now: Timestamp) -> Option<Change<Self>> {
        reconcile_list(self, report, |stored, name, r| {
            reconcile_pod_volume(stored, name, r, now)
        })
    }

    fn merge(newer: &mut Self::Report, older: Self::Report) {
        merge_entries(newer, older);
    }

    fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
}

/// `csinode.status.storageHealth`, keyed by driver name.
impl HealthField for Vec<StorageHealth> {
    type Report = EntryReports<StorageHealthCondition>;

    fn reconcile(&self, report: &Self::Report, now: Timestamp) -> Option<Change<Self>> {
        reconcile_list(self, report, |stored, name, r| {
            reconcile_storage(stored, name, r, now)
        })
    }

    fn merge(newer: &mut Self::Report, older: Self::Report) {
        merge_entries(newer, older);
    }

    fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volhealth_csi::v1::volume_health::VolumeHealthEntry;
    use volhealth_model::volume_report;

    fn report(status: i32, reason: &str) -> Report<VolumeHealthCondition> {
        volume_report(&[VolumeHealthEntry {
            status,
            reason: reason.into(),
            message: String::new(),
        }])
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_claim_takes_the_report_and_its_severity() {
        let none: Option<VolumeHealthStatus> = None;
        let degraded = report(1, "SlowIo");
        let change = none
            .reconcile(&degraded, at(10))
            .expect("a first condition");
        assert_eq!(change.priority, degraded.severity());
        assert!(!change.value.is_empty());
        assert_eq!(change.value.reconcile(&degraded, at(20)), None);
        let cleared = change.value.reconcile(&Report::healthy(), at(30)).unwrap();
        assert_eq!(cleared.value, None);
        assert_eq!(cleared.priority, usize::MAX, "a recovery goes last");
    }

    #[test]
    fn a_list_is_decided_once_with_the_most_severe_changed_entry() {
        let mut reports = EntryReports {
            entries: BTreeMap::from([
                ("b".to_string(), report(1, "SlowIo")),
                ("a".to_string(), report(2, "Gone")),
            ]),
            order: vec!["b".into(), "a".into()],
        };
        let change = Vec::<PodVolumeHealth>::new()
            .reconcile(&reports, at(1))
            .unwrap();
        let names: Vec<&str> = change.value.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["b", "a"], "spec order");
        assert_eq!(
            change.priority,
            reports.entries["a"]
                .severity()
                .min(reports.entries["b"].severity())
        );
        // Only "b" changes now: the place in line is its severity, not "a"'s.
        reports.entries.insert("b".into(), report(1, "Other"));
        let again = change.value.reconcile(&reports, at(2)).unwrap();
        assert_eq!(again.priority, reports.entries["b"].severity());
        assert_eq!(again.value.reconcile(&reports, at(3)), None);
    }

    #[test]
    fn storage_entries_sort_by_name_and_older_reports_fill_in() {
        let storage = |reason: &str| {
            volhealth_model::storage_report(&[
                volhealth_csi::v1::node_get_storage_health_response::StorageBackendHealth {
                    status: 1,
                    reason: reason.into(),
                    ..Default::default()
                },
            ])
        };
        let mut newer = EntryReports {
            entries: BTreeMap::from([("z".to_string(), storage("New"))]),
            order: Vec::new(),
        };
        let older = EntryReports {
            entries: BTreeMap::from([
                ("z".to_string(), storage("Old")),
                ("a".to_string(), storage("Kept")),
            ]),
            order: Vec::new(),
        };
        <Vec<StorageHealth> as HealthField>::merge(&mut newer, older);
        assert_eq!(newer.entries["z"], storage("New"), "the newer report wins");
        assert_eq!(newer.entries["a"], storage("Kept"));
        let change = Vec::<StorageHealth>::new()
            .reconcile(&newer, at(1))
            .unwrap();
        let names: Vec<&str> = change.value.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "z"]);
    }
}
