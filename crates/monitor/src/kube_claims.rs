//! [`ClaimStore`] over reflector caches of PVs and PVCs (the only objects the monitor watches).

use crate::claims::{
    BoundClaim, ClaimKey, ClaimStore, StoredClaim, map_bound_claims, stored_claim,
};
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PersistentVolumeSpec,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};
use std::collections::BTreeMap;
use volhealth_writer::kube_client::spawn_slim_reflector;

/// The identity and version of an object, and nothing else of its metadata.
fn slim_meta(m: &mut ObjectMeta) {
    *m = ObjectMeta {
        name: m.name.take(),
        namespace: m.namespace.take(),
        uid: m.uid.take(),
        resource_version: m.resource_version.take(),
        ..ObjectMeta::default()
    };
}

/// What the monitor reads of a PV: its CSI driver and volume handle, and its claim.
pub(crate) fn slim_pv(pv: &mut PersistentVolume) {
    slim_meta(&mut pv.metadata);
    pv.status = None;
    pv.spec = pv.spec.take().map(|s| PersistentVolumeSpec {
        csi: s.csi.map(|c| CSIPersistentVolumeSource {
            driver: c.driver,
            volume_handle: c.volume_handle,
            ..CSIPersistentVolumeSource::default()
        }),
        claim_ref: s.claim_ref.map(|r| ObjectReference {
            namespace: r.namespace,
            name: r.name,
            uid: r.uid,
            ..ObjectReference::default()
        }),
        ..PersistentVolumeSpec::default()
    });
}

/// What the monitor reads of a PVC: the volume it is bound to, its phase and its health.
pub(crate) fn slim_pvc(pvc: &mut PersistentVolumeClaim) {
    slim_meta(&mut pvc.metadata);
    pvc.spec = pvc.spec.take().map(|s| PersistentVolumeClaimSpec {
        volume_name: s.volume_name,
        ..PersistentVolumeClaimSpec::default()
    });
    pvc.status = pvc.status.take().map(|s| PersistentVolumeClaimStatus {
        phase: s.phase,
        health_status: s.health_status,
        ..PersistentVolumeClaimStatus::default()
    });
}

/// Watches every PV and PVC and keeps them in memory.
#[derive(Clone)]
pub struct KubeClaims {
    pvs: Store<PersistentVolume>,
    pvcs: Store<PersistentVolumeClaim>,
    synced_rx: tokio::sync::watch::Receiver<Option<bool>>,
}

impl KubeClaims {
    /// Starts the two watches (they run until the runtime stops).
    pub fn start(client: Client) -> Self {
        let pvs = spawn_slim_reflector(
            Api::<PersistentVolume>::all(client.clone()),
            "persistentvolumes",
            slim_pv,
        );
        let pvcs = spawn_slim_reflector(
            Api::<PersistentVolumeClaim>::all(client),
            "persistentvolumeclaims",
            slim_pvc,
        );
        let (tx, synced_rx) = tokio::sync::watch::channel(None);
        let (p, c) = (pvs.clone(), pvcs.clone());
        // The stores' readiness wakes only one waiter, so this task is the only one and tells the rest.
        tokio::spawn(async move {
            let ok = p.wait_until_ready().await.is_ok() && c.wait_until_ready().await.is_ok();
            tx.send_replace(Some(ok));
        });
        KubeClaims {
            pvs,
            pvcs,
            synced_rx,
        }
    }

    /// Waits until both caches hold their initial lists (false if they never will).
    pub async fn wait_synced(&self) -> bool {
        let mut rx = self.synced_rx.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.unwrap_or(false),
            Err(_) => false,
        }
    }
}

impl ClaimStore for KubeClaims {
    fn bound_claims(&self, driver: &str) -> BTreeMap<String, BoundClaim> {
        let pvs = self.pvs.state();
        let pvcs = self.pvcs.state();
        map_bound_claims(
            driver,
            pvs.iter().map(|p| p.as_ref()),
            pvcs.iter().map(|c| c.as_ref()),
        )
    }

    fn claim(&self, key: &ClaimKey) -> Option<StoredClaim> {
        let r = ObjectRef::<PersistentVolumeClaim>::new(&key.name).within(&key.namespace);
        self.pvcs.get(&r).map(|c| stored_claim(&c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::fixtures::{pv, pvc};
    use serde_json::json;

    #[test]
    fn slim_objects_map_to_the_same_claims_and_keep_little() {
        let mut full_pv = pv("pv-a", "d", "vol-a", Some(("ns", "a")));
        let mut full_pvc = pvc("ns", "a", "pv-a", "Bound");
        // What a real cluster adds, none of which the monitor reads.
        let extra: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "ns",
                         "annotations": {"big": "x".repeat(4096)}, "labels": {"app": "web"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                     "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
        }))
        .unwrap();
        full_pvc.metadata.annotations = extra.metadata.annotations;
        full_pvc.metadata.labels = extra.metadata.labels;
        if let (Some(s), Some(e)) = (full_pvc.spec.as_mut(), extra.spec) {
            s.access_modes = e.access_modes;
            s.storage_class_name = e.storage_class_name;
            s.resources = e.resources;
        }
        if let (Some(s), Some(e)) = (full_pvc.status.as_mut(), extra.status) {
            s.capacity = e.capacity;
        }
        full_pv.metadata.labels = Some([("zone".to_string(), "a".to_string())].into());
        let before = map_bound_claims(
            "d",
            std::slice::from_ref(&full_pv),
            std::slice::from_ref(&full_pvc),
        );
        let stored_before = stored_claim(&full_pvc);
        let (mut slim_v, mut slim_c) = (full_pv.clone(), full_pvc.clone());
        slim_pv(&mut slim_v);
        slim_pvc(&mut slim_c);
        let after = map_bound_claims(
            "d",
            std::slice::from_ref(&slim_v),
            std::slice::from_ref(&slim_c),
        );
        assert_eq!(before.len(), 1);
        assert_eq!(format!("{before:?}"), format!("{after:?}"));
        assert_eq!(
            format!("{stored_before:?}"),
            format!("{:?}", stored_claim(&slim_c))
        );
        let size = |v: &PersistentVolumeClaim| serde_json::to_string(v).unwrap().len();
        assert!(
            size(&slim_c) * 10 < size(&full_pvc),
            "the cached claim keeps little: {} of {} bytes",
            size(&slim_c),
            size(&full_pvc)
        );
        assert!(slim_c.metadata.annotations.is_none() && slim_v.metadata.labels.is_none());
    }
}
