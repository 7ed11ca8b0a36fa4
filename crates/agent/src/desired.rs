//! What the agent's probe cycles want stored, as the shared write queue carries it: the latest
//! report of each probed volume of a pod, or of each driver's storage backend, reconciled with
//! what is stored only when the write goes out ([`QueuedTarget`]), and its place in line by the
//! model's severity order.

use crate::targets::{PodKey, PodTarget, StorageTarget};
use k8s_openapi::api::core::v1::PodVolumeHealth;
use k8s_openapi::api::storage::v1::StorageHealth;
use std::collections::BTreeMap;
use volhealth_model::sanitize::Condition;
use volhealth_model::{
    NamedEntry, Report, StorageHealthCondition, VolumeHealthCondition, reconcile_entry,
    reconcile_pod_volume, reconcile_storage,
};
use volhealth_writer::{Outcome, QueuedTarget, StatusWriter, Stored, WriteQueue};

/// A pod's wanted volume health: the latest report of each volume probed, and the order of
/// `pod.spec.volumes` the stored list follows.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDesired {
    /// Volume name → its latest report.
    pub volumes: BTreeMap<String, Report<VolumeHealthCondition>>,
    /// The names of `pod.spec.volumes`, in order.
    pub order: Vec<String>,
}

/// A CSINode's wanted storage health: the latest report of each registered driver probed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StorageDesired {
    /// Driver name → its latest report.
    pub drivers: BTreeMap<String, Report<StorageHealthCondition>>,
}

/// Adds `older` reports under `newer` ones: a report still waiting to be written stands while a
/// later cycle could not probe its volume (the latest report of each entry wins).
pub fn merge_reports<C: Clone>(
    newer: &mut BTreeMap<String, Report<C>>,
    older: BTreeMap<String, Report<C>>,
) {
    for (name, report) in older {
        newer.entry(name).or_insert(report);
    }
}

/// The place in line of a write of `reports` over `before`: the most severe report among those
/// that would change their entry (the model's order: 0 is most severe); recoveries and no-ops go
/// last.
pub fn priority<E: NamedEntry, C: Condition>(
    before: &[E],
    reports: &BTreeMap<String, Report<C>>,
    changes: impl Fn(Option<&E>, &str, &Report<C>) -> bool,
) -> usize {
    reports
        .iter()
        .filter(|(name, report)| {
            let stored = before.iter().find(|e| e.entry_name() == name.as_str());
            changes(stored, name, report)
        })
        .map(|(_, report)| report.severity())
        .min()
        .unwrap_or(usize::MAX)
}

/// Queues `desired` for `key` when it would change `before` (the value stored now), or when it
/// `supersedes` a write still pending: a pending write that is stale now must not land after
/// this report, so it is replaced even when nothing would change. An object held back after a
/// refused or dropped write is left alone: a cycle after the hold asks again.
pub fn offer<T: QueuedTarget>(
    writer: &StatusWriter<T>,
    queue: &WriteQueue<T::Key, T::Desired>,
    key: T::Key,
    before: &T::Value,
    desired: T::Desired,
    supersedes: bool,
    priority: impl FnOnce(&T::Desired) -> usize,
) where
    T::Key: Ord,
{
    let changes = writer.target().reconcile(before, &desired).is_some();
    if !(changes || supersedes) {
        return;
    }
    if changes && !supersedes && writer.is_refused(&key) && !writer.may_write(&key) {
        return;
    }
    let priority = priority(&desired);
    queue.push(key, desired, priority);
}

/// Sorts a pod's entries in the order of its `spec.volumes`.
fn sort_by_spec_order(order: &[String], list: &mut [PodVolumeHealth]) {
    list.sort_by_key(|e| {
        order
            .iter()
            .position(|n| *n == e.name)
            .unwrap_or(usize::MAX)
    });
}

impl QueuedTarget for PodTarget {
    type Desired = PodDesired;

    fn cached(&self, key: &PodKey) -> Option<Stored<Vec<PodVolumeHealth>>> {
        let pod = self
            .pods
            .pod(&key.namespace, &key.name)
            .filter(|p| p.metadata.uid.as_deref() == Some(key.uid.as_str()))?;
        Some(Stored {
            uid: Some(key.uid.clone()),
            resource_version: pod.metadata.resource_version.clone(),
            value: pod
                .status
                .as_ref()
                .and_then(|s| s.volume_health.clone())
                .unwrap_or_default(),
        })
    }

    fn reconcile(
        &self,
        before: &Vec<PodVolumeHealth>,
        desired: &PodDesired,
    ) -> Option<Vec<PodVolumeHealth>> {
        let now = self.clock.now();
        let mut list = before.clone();
        let mut changed = false;
        for (volume, report) in &desired.volumes {
            changed |= reconcile_entry(&mut list, volume, |entry| {
                reconcile_pod_volume(entry, volume, report, now)
            });
        }
        changed.then(|| {
            sort_by_spec_order(&desired.order, &mut list);
            list
        })
    }

    fn answered(
        &self,
        key: &PodKey,
        _desired: &PodDesired,
        outcome: &Outcome<Vec<PodVolumeHealth>>,
    ) {
        if let Outcome::Forbidden(e) = outcome {
            self.forbidden.note(
                format!("patching pods/{}/status in {}", key.name, key.namespace),
                e,
            );
        }
    }
}

impl QueuedTarget for StorageTarget {
    type Desired = StorageDesired;

    fn cached(&self, node: &String) -> Option<Stored<Vec<StorageHealth>>> {
        self.cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|(name, _)| name == node)
            .map(|(_, stored)| stored.clone())
    }

    fn reconcile(
        &self,
        before: &Vec<StorageHealth>,
        desired: &StorageDesired,
    ) -> Option<Vec<StorageHealth>> {
        let now = self.clock.now();
        let mut list = before.clone();
        let mut changed = false;
        for (driver, report) in &desired.drivers {
            changed |= reconcile_entry(&mut list, driver, |entry| {
                reconcile_storage(entry, driver, report, now)
            });
        }
        changed.then(|| {
            list.sort_by(|a, b| a.name.cmp(&b.name));
            list
        })
    }

    fn answered(
        &self,
        node: &String,
        desired: &StorageDesired,
        outcome: &Outcome<Vec<StorageHealth>>,
    ) {
        match outcome {
            Outcome::Written(stored) => {
                // A driver whose entry the write removed has no series left either.
                for name in desired.drivers.keys() {
                    let conditions = stored
                        .iter()
                        .find(|e| &e.name == name)
                        .and_then(|e| e.health_conditions.as_deref())
                        .unwrap_or(&[]);
                    self.metrics.set_storage_conditions(name, conditions);
                }
            }
            Outcome::Forbidden(e) => self
                .forbidden
                .note(format!("patching csinodes/{node}/status"), e),
            Outcome::Held
            | Outcome::Dropped
            | Outcome::Refused(_)
            | Outcome::Gone
            | Outcome::Conflict
            | Outcome::Unavailable => {}
        }
    }
}

/// Whether `report` would change the stored entry of volume `name`.
pub fn volume_changes(
    stored: Option<&PodVolumeHealth>,
    name: &str,
    report: &Report<VolumeHealthCondition>,
    now: jiff::Timestamp,
) -> bool {
    reconcile_pod_volume(stored, name, report, now).is_some()
}

/// Whether `report` would change the stored entry of driver `name`.
pub fn storage_changes(
    stored: Option<&StorageHealth>,
    name: &str,
    report: &Report<StorageHealthCondition>,
    now: jiff::Timestamp,
) -> bool {
    reconcile_storage(stored, name, report, now).is_some()
}
