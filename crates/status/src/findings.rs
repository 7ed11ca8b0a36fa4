//! Turning the API objects into one flat list of unhealthy things ("findings"), the single shape
//! every output format is rendered from.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Pod, VolumeHealthCondition,
};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use serde::Serialize;
use std::collections::BTreeMap;
use volhealth_kube_access::objects::pod_volumes;

/// Which writer a condition comes from, in the KEP's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The CSI controller plugin, written by the monitor to `pvc.status.healthStatus`.
    Controller,
    /// The CSI node plugin, written by the node agent to `pod.status.volumeHealth`.
    Node,
    /// The storage backend as a node sees it, written by the node agent to
    /// `csinode.status.storageHealth`.
    Backend,
}

impl Source {
    /// The lowercase name used in every output format.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Controller => "controller",
            Source::Node => "node",
            Source::Backend => "backend",
        }
    }
}

/// One unhealthy condition on one object. Field names are the documented `-o json` schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Namespace of the object; `null` for CSINodes (cluster-scoped).
    pub namespace: Option<String>,
    /// `PersistentVolumeClaim`, `Pod` or `CSINode`.
    pub kind: String,
    /// Object name.
    pub name: String,
    /// Which side reported it.
    pub source: Source,
    /// The API status string (`Inaccessible`, `DataLoss`, `Degraded`, `StorageUnreachable`,
    /// `StorageDegraded`, or whatever else is stored).
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message ("" when none).
    pub message: String,
    /// When the condition set (PVC, pod volume) or this condition (storage) last changed.
    pub last_transition_time: Option<String>,
    /// Pod: spec.nodeName; CSINode: its name; PVC: `null`.
    pub node: Option<String>,
    /// CSI driver name, when known.
    pub driver: Option<String>,
    /// Pod: the `pod.spec.volumes` name; otherwise `null`.
    pub pod_volume: Option<String>,
    /// The PVC name: the object itself for PVCs, the claim behind the volume for pods.
    pub claim: Option<String>,
    /// The bound PersistentVolume, when known.
    pub persistent_volume: Option<String>,
    /// Storage conditions only: the access mode affected (`null` = all).
    pub access_mode: Option<String>,
    /// Storage conditions only: the volume mode affected (`null` = both).
    pub volume_mode: Option<String>,
}

impl Finding {
    /// A finding of one condition (status, reason, message) on `kind` `name`, as `source`
    /// reported it; what else is known of the object is the caller's to add.
    pub(crate) fn of_condition(
        kind: &str,
        name: &str,
        source: Source,
        (status, reason, message): (&str, &str, Option<&str>),
    ) -> Finding {
        Finding {
            namespace: None,
            kind: kind.to_string(),
            name: name.to_string(),
            source,
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.unwrap_or_default().to_string(),
            last_transition_time: None,
            node: None,
            driver: None,
            pod_volume: None,
            claim: None,
            persistent_volume: None,
            access_mode: None,
            volume_mode: None,
        }
    }

    /// `kind/name` in kubectl's short form, e.g. `pvc/data-0`.
    pub fn object(&self) -> String {
        let short = match self.kind.as_str() {
            "PersistentVolumeClaim" => "pvc",
            "Pod" => "pod",
            "CSINode" => "csinode",
            other => other,
        };
        format!("{short}/{}", self.name)
    }

    /// When the condition last changed, parsed.
    pub fn since(&self) -> Option<Timestamp> {
        self.last_transition_time
            .as_deref()
            .and_then(|t| t.parse().ok())
    }

    /// Namespaced objects first (by namespace), cluster-scoped CSINodes last.
    fn sort_key(
        &self,
    ) -> (
        bool,
        Option<String>,
        Source,
        String,
        Option<String>,
        String,
        String,
    ) {
        (
            self.namespace.is_none(),
            self.namespace.clone(),
            self.source,
            self.name.clone(),
            self.pod_volume.clone(),
            self.status.clone(),
            self.reason.clone(),
        )
    }
}

/// What `status` read from the API.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// PVCs in scope.
    pub pvcs: Vec<PersistentVolumeClaim>,
    /// Pods in scope.
    pub pods: Vec<Pod>,
    /// All CSINodes.
    pub csinodes: Vec<CSINode>,
    /// All PVs (empty when they may not be listed; only used to name drivers).
    pub pvs: Vec<PersistentVolume>,
    /// All CSIDrivers (empty when they may not be listed; only used for what watches a
    /// driver's volumes on the controller side).
    pub csidrivers: Vec<CSIDriver>,
}

fn time(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<String> {
    t.map(|t| t.0.to_string())
}

fn volume_conditions(list: Option<&Vec<VolumeHealthCondition>>) -> &[VolumeHealthCondition] {
    list.map(Vec::as_slice).unwrap_or_default()
}

/// The CSI driver of each CSI PersistentVolume in `snap`, by volume name.
pub fn pv_drivers(snap: &Snapshot) -> BTreeMap<&str, &str> {
    snap.pvs
        .iter()
        .filter_map(|pv| {
            let name = pv.metadata.name.as_deref()?;
            let driver = pv.spec.as_ref()?.csi.as_ref()?.driver.as_str();
            Some((name, driver))
        })
        .collect()
}

/// Every unhealthy condition in `snap`, sorted by namespace, source, object and status.
pub fn collect(snap: &Snapshot) -> Vec<Finding> {
    let pv_driver = pv_drivers(snap);
    let claim_pv: BTreeMap<(&str, &str), &str> = snap
        .pvcs
        .iter()
        .filter_map(|pvc| {
            let ns = pvc.metadata.namespace.as_deref()?;
            let name = pvc.metadata.name.as_deref()?;
            let pv = pvc.spec.as_ref()?.volume_name.as_deref()?;
            Some(((ns, name), pv))
        })
        .collect();

    let mut out = Vec::new();
    for pvc in &snap.pvcs {
        let Some(health) = pvc.status.as_ref().and_then(|s| s.health_status.as_ref()) else {
            continue;
        };
        let name = pvc.metadata.name.clone().unwrap_or_default();
        let pv = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
        for c in volume_conditions(health.health_conditions.as_ref()) {
            let condition = (c.status.as_str(), c.reason.as_str(), c.message.as_deref());
            out.push(Finding {
                namespace: pvc.metadata.namespace.clone(),
                last_transition_time: time(health.last_transition_time.as_ref()),
                driver: pv
                    .as_deref()
                    .and_then(|p| pv_driver.get(p))
                    .map(|d| d.to_string()),
                claim: Some(name.clone()),
                persistent_volume: pv.clone(),
                ..Finding::of_condition(
                    "PersistentVolumeClaim",
                    &name,
                    Source::Controller,
                    condition,
                )
            });
        }
    }

    for pod in &snap.pods {
        let Some(entries) = pod.status.as_ref().and_then(|s| s.volume_health.as_ref()) else {
            continue;
        };
        let ns = pod.metadata.namespace.clone();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.as_ref();
        for entry in entries {
            let spec_volume = pod_volumes(pod).iter().find(|v| v.name == entry.name);
            let claim = spec_volume
                .and_then(|v| v.persistent_volume_claim.as_ref())
                .map(|c| c.claim_name.clone());
            let pv = claim
                .as_deref()
                .and_then(|c| claim_pv.get(&(ns.as_deref().unwrap_or_default(), c)))
                .map(|p| p.to_string());
            let driver = pv
                .as_deref()
                .and_then(|p| pv_driver.get(p))
                .map(|d| d.to_string())
                .or_else(|| {
                    spec_volume
                        .and_then(|v| v.csi.as_ref())
                        .map(|c| c.driver.clone())
                });
            for c in volume_conditions(entry.health_conditions.as_ref()) {
                let condition = (c.status.as_str(), c.reason.as_str(), c.message.as_deref());
                out.push(Finding {
                    namespace: ns.clone(),
                    last_transition_time: time(entry.last_transition_time.as_ref()),
                    node: spec.and_then(|s| s.node_name.clone()),
                    driver: driver.clone(),
                    pod_volume: Some(entry.name.clone()),
                    claim: claim.clone(),
                    persistent_volume: pv.clone(),
                    ..Finding::of_condition("Pod", &name, Source::Node, condition)
                });
            }
        }
    }

    for csinode in &snap.csinodes {
        let Some(drivers) = csinode
            .status
            .as_ref()
            .and_then(|s| s.storage_health.as_ref())
        else {
            continue;
        };
        let name = csinode.metadata.name.clone().unwrap_or_default();
        for driver in drivers {
            for c in driver.health_conditions.iter().flatten() {
                let condition = (c.status.as_str(), c.reason.as_str(), c.message.as_deref());
                out.push(Finding {
                    last_transition_time: time(c.last_transition_time.as_ref()),
                    node: Some(name.clone()),
                    driver: Some(driver.name.clone()),
                    access_mode: c.access_mode.clone(),
                    volume_mode: c.volume_mode.clone(),
                    ..Finding::of_condition("CSINode", &name, Source::Backend, condition)
                });
            }
        }
    }
    out.sort_by_key(Finding::sort_key);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            pvcs: vec![
                from(
                    json!({"metadata": {"name": "data-1", "namespace": "default"}, "spec": {"volumeName": "pv-1"},
                    "status": {"healthStatus": {"lastTransitionTime": "2026-01-01T00:00:00Z",
                        "healthConditions": [{"status": "Inaccessible", "reason": "VolumeNotFound", "message": "gone"}]}}}),
                ),
                from(
                    json!({"metadata": {"name": "ok", "namespace": "default"}, "spec": {"volumeName": "pv-2"}, "status": {}}),
                ),
                from(
                    json!({"metadata": {"name": "empty", "namespace": "default"},
                    "status": {"healthStatus": {"healthConditions": []}}}),
                ),
            ],
            pods: vec![from(json!({
                "metadata": {"name": "web-1", "namespace": "default"},
                "spec": {"nodeName": "node-1", "containers": [],
                         "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-1"}}]},
                "status": {"volumeHealth": [{"name": "data", "lastTransitionTime": "2026-01-01T00:00:05Z",
                    "healthConditions": [{"status": "Degraded", "reason": "SlowIo"}]}]}}))],
            csinodes: vec![from(json!({
                "metadata": {"name": "node-2"}, "spec": {"drivers": []},
                "status": {"storageHealth": [{"name": "hostpath.volhealth.io", "healthConditions": [
                    {"status": "StorageUnreachable", "reason": "BackendDown", "accessMode": "ReadWriteOnce",
                     "lastTransitionTime": "2026-01-01T00:00:09Z"}]}]}}))],
            pvs: vec![from(json!({"metadata": {"name": "pv-1"},
                "spec": {"csi": {"driver": "hostpath.volhealth.io", "volumeHandle": "vh-1"}}}))],
            csidrivers: vec![],
        }
    }

    #[test]
    fn every_unhealthy_condition_becomes_one_finding_with_its_context() {
        let f = collect(&snapshot());
        assert_eq!(f.len(), 3, "{f:#?}");
        assert_eq!(f[0].object(), "pvc/data-1");
        assert_eq!(f[0].source, Source::Controller);
        assert_eq!(f[0].driver.as_deref(), Some("hostpath.volhealth.io"));
        assert_eq!(f[0].persistent_volume.as_deref(), Some("pv-1"));
        assert_eq!(f[1].object(), "pod/web-1");
        assert_eq!(f[1].source, Source::Node);
        assert_eq!(f[1].node.as_deref(), Some("node-1"));
        assert_eq!(f[1].claim.as_deref(), Some("data-1"));
        assert_eq!(f[1].driver.as_deref(), Some("hostpath.volhealth.io"));
        assert_eq!(f[1].message, "");
        let s = &f[2];
        assert_eq!(s.object(), "csinode/node-2");
        assert_eq!(s.source, Source::Backend);
        assert_eq!(s.access_mode.as_deref(), Some("ReadWriteOnce"));
        assert_eq!(s.volume_mode, None);
        assert_eq!(
            s.since().map(|t| t.to_string()).as_deref(),
            Some("2026-01-01T00:00:09Z")
        );
    }

    #[test]
    fn healthy_objects_give_nothing() {
        let mut snap = snapshot();
        snap.pvcs.remove(0);
        snap.pods.clear();
        snap.csinodes.clear();
        assert!(collect(&snap).is_empty());
    }
}
