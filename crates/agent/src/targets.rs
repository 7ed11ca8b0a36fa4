//! The agent's two object kinds for the shared writer: a pod's `status.volumeHealth` and a
//! CSINode's `status.storageHealth`, each a list keyed by name, with one Event per entry that
//! changed. What a report makes of them is decided by the writer's offer path
//! ([`volhealth_writer::Offers`]); here is how each is read, patched and counted.

use crate::cluster::{Cluster, PodSource};
use crate::forbidden::Forbidden;
use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::PodVolumeHealth;
use k8s_openapi::api::storage::v1::StorageHealth;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use volhealth_model::sanitize::Condition;
use volhealth_model::{StorageHealthCondition, Timestamp, VolumeHealthCondition};
use volhealth_writer::events::{Subject, Transition};
use volhealth_writer::{
    ApiFailure, Clock, EntryReports, EventSink, HealthEvent, ObjectRef, Outcome, Patched,
    QueuedTarget, Stored, Target,
};

/// `resource` label of pod status writes.
pub const POD_RESOURCE: &str = "pods/status";
/// `resource` label of CSINode status writes.
pub const STORAGE_RESOURCE: &str = "csinodes/status";

/// A pod by namespace, name and uid (a pod re-created under the same name is another pod).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The Events for a keyed list whose entries went from `before` to `after`.
fn entry_events<E, C: Condition>(
    object: &ObjectRef,
    subject: Subject,
    noun: &str,
    before: &[E],
    after: &[E],
    name: impl Fn(&E) -> &str,
    conditions: impl Fn(&E) -> &[C],
) -> Vec<HealthEvent> {
    let names: BTreeSet<&str> = before.iter().chain(after).map(&name).collect();
    names
        .into_iter()
        .flat_map(|n| {
            let find = |list: &[E]| -> Vec<C> {
                list.iter()
                    .find(|e| name(e) == n)
                    .map(|e| conditions(e).to_vec())
                    .unwrap_or_default()
            };
            Transition {
                object,
                subject,
                context: Some(&format!("{noun} {n}")),
                before: &find(before),
                after: &find(after),
            }
            .events()
        })
        .collect()
}

/// Pod volume health as a [`Target`].
pub struct PodTarget {
    /// The API.
    pub cluster: Arc<dyn Cluster>,
    /// The pods as the agent's watch shows them (what a write is reconciled against).
    pub pods: Arc<dyn PodSource>,
    /// Where `lastTransitionTime` comes from.
    pub clock: Arc<dyn Clock>,
    /// Series that follow what is stored.
    pub metrics: Arc<Metrics>,
    /// Where a forbidden write is noted, to stop the agent.
    pub forbidden: Arc<Forbidden>,
}

impl Target for PodTarget {
    type Key = PodKey;
    type Value = Vec<PodVolumeHealth>;

    fn resource(&self) -> &'static str {
        POD_RESOURCE
    }

    async fn patch(
        &self,
        key: &PodKey,
        value: &Self::Value,
    ) -> Result<Patched<Self::Value>, ApiFailure> {
        let pod = self
            .cluster
            .patch_pod_volume_health(&key.namespace, &key.name, value)
            .await?;
        Ok(Patched {
            resource_version: pod.metadata.resource_version.clone(),
            value: pod.status.and_then(|s| s.volume_health).unwrap_or_default(),
        })
    }

    fn written(&self, key: &PodKey, value: &Self::Value) {
        self.metrics.set_pod(&key.namespace, &key.name, value);
    }

    fn transitions(
        &self,
        key: &PodKey,
        _stored: &Stored<Self::Value>,
        before: &Self::Value,
        after: &Self::Value,
    ) -> Vec<HealthEvent> {
        let object = ObjectRef {
            api_version: "v1",
            kind: "Pod",
            namespace: Some(key.namespace.clone()),
            name: key.name.clone(),
            uid: Some(key.uid.clone()),
        };
        entry_events(
            &object,
            Subject::Volume,
            "volume",
            before,
            after,
            |e| e.name.as_str(),
            |e| e.health_conditions.as_deref().unwrap_or(&[]),
        )
    }
}

/// CSINode storage health as a [`Target`]; the key is the node name.
pub struct StorageTarget {
    /// The API.
    pub cluster: Arc<dyn Cluster>,
    /// Where `lastTransitionTime` comes from.
    pub clock: Arc<dyn Clock>,
    /// The CSINode as the last storage cycle read it: (node name, its health as stored).
    pub cached: Mutex<Option<(String, Stored<Vec<StorageHealth>>)>>,
    /// Series that follow what is stored.
    pub metrics: Arc<Metrics>,
    /// Where a forbidden write is noted, to stop the agent.
    pub forbidden: Arc<Forbidden>,
}

impl StorageTarget {
    /// Remembers the CSINode of `node` as just read, for the write loop to reconcile against.
    pub fn remember(&self, node: &str, stored: Stored<Vec<StorageHealth>>) {
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = Some((node.to_string(), stored));
    }
}

impl Target for StorageTarget {
    type Key = String;
    type Value = Vec<StorageHealth>;

    fn resource(&self) -> &'static str {
        STORAGE_RESOURCE
    }

    async fn patch(
        &self,
        node: &String,
        value: &Self::Value,
    ) -> Result<Patched<Self::Value>, ApiFailure> {
        let csinode = self
            .cluster
            .patch_csinode_storage_health(node, value)
            .await?;
        Ok(Patched {
            resource_version: csinode.metadata.resource_version.clone(),
            value: csinode
                .status
                .and_then(|s| s.storage_health)
                .unwrap_or_default(),
        })
    }

    fn written(&self, _node: &String, value: &Self::Value) {
        for entry in value {
            self.metrics.set_storage_conditions(
                &entry.name,
                entry.health_conditions.as_deref().unwrap_or(&[]),
            );
        }
    }

    fn transitions(
        &self,
        node: &String,
        stored: &Stored<Self::Value>,
        before: &Self::Value,
        after: &Self::Value,
    ) -> Vec<HealthEvent> {
        let object = ObjectRef {
            api_version: "storage.k8s.io/v1",
            kind: "CSINode",
            namespace: None,
            name: node.clone(),
            uid: stored.uid.clone(),
        };
        entry_events(
            &object,
            Subject::Storage,
            "driver",
            before,
            after,
            |e| e.name.as_str(),
            |e| e.health_conditions.as_deref().unwrap_or(&[]),
        )
    }
}

/// Events through the agent's [`Cluster`] boundary.
pub struct ClusterEvents(pub Arc<dyn Cluster>);

impl EventSink for ClusterEvents {
    async fn create(&self, event: &HealthEvent, count: i32) -> Result<(), ApiFailure> {
        self.0.create_event(event, count).await
    }
}

impl QueuedTarget for PodTarget {
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

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The series show what is stored; a write that lands moves them on.
    fn observed(
        &self,
        key: &PodKey,
        stored: &Vec<PodVolumeHealth>,
        _report: &EntryReports<VolumeHealthCondition>,
    ) {
        self.metrics.set_pod(&key.namespace, &key.name, stored);
    }

    fn answered(
        &self,
        key: &PodKey,
        _report: &EntryReports<VolumeHealthCondition>,
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

/// Makes the series of the drivers `report` speaks of show `stored` (a driver with no entry
/// there has no series left).
fn storage_series(
    metrics: &Metrics,
    stored: &[StorageHealth],
    report: &EntryReports<StorageHealthCondition>,
) {
    for name in report.entries.keys() {
        let conditions = stored
            .iter()
            .find(|e| &e.name == name)
            .and_then(|e| e.health_conditions.as_deref())
            .unwrap_or(&[]);
        metrics.set_storage_conditions(name, conditions);
    }
}

impl QueuedTarget for StorageTarget {
    fn cached(&self, node: &String) -> Option<Stored<Vec<StorageHealth>>> {
        self.cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|(name, _)| name == node)
            .map(|(_, stored)| stored.clone())
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The series show what is stored; a write that lands moves them on.
    fn observed(
        &self,
        _node: &String,
        stored: &Vec<StorageHealth>,
        report: &EntryReports<StorageHealthCondition>,
    ) {
        storage_series(&self.metrics, stored, report);
    }

    fn answered(
        &self,
        node: &String,
        report: &EntryReports<StorageHealthCondition>,
        outcome: &Outcome<Vec<StorageHealth>>,
    ) {
        match outcome {
            Outcome::Written(stored) => storage_series(&self.metrics, stored, report),
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
