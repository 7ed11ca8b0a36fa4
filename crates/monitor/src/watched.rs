//! What the monitor keeps of the PVs and PVCs it watches: the objects are decoded into types
//! holding only the fields the writers read ([`WatchedPv`], [`WatchedPvc`], shared with the agent
//! in `volhealth_kube_access::watched`; every other field, managedFields and annotations among
//! them, is skipped while decoding, never allocated) and then kept as one small record each
//! ([`PvRecord`], [`PvcRecord`]). A PV of another driver is not kept at all.
//!
//! A record is a few hundred bytes; a k8s-openapi `PersistentVolume` is several KiB of struct
//! even with every optional field empty, which at 5,000 volumes was most of the monitor's memory.

use crate::claims::{BoundClaim, ClaimKey, StoredClaim};
use k8s_openapi::api::core::v1::VolumeHealthStatus;
use std::collections::{BTreeMap, HashMap};

pub use volhealth_kube_access::watched::{HEALTH_ANNOTATION, WatchedPv, WatchedPvc};

/// A PV of a CSI driver with a claim reference.
#[derive(Debug, Clone, PartialEq)]
pub struct PvRecord {
    driver: Box<str>,
    volume_handle: Box<str>,
    claim: ClaimKey,
    claim_uid: Option<Box<str>>,
    /// The PV has a deletionTimestamp: it is not probed, and its claim's health is stale.
    deleting: bool,
}

/// A claim: enough to join it with its PV and to tell what is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct PvcRecord {
    uid: Box<str>,
    resource_version: Option<Box<str>>,
    volume_name: Option<Box<str>>,
    phase_bound: bool,
    health: Option<VolumeHealthStatus>,
    health_annotation: Option<Box<str>>,
}

impl PvcRecord {
    /// The claim's stored fields.
    pub fn stored(&self) -> StoredClaim {
        StoredClaim {
            uid: self.uid.to_string(),
            resource_version: self.resource_version.as_deref().map(str::to_string),
            health: self.health.clone(),
            health_annotation: self.health_annotation.as_deref().map(str::to_string),
        }
    }
}

/// A PV's cache key: its name.
pub fn pv_key(pv: &WatchedPv) -> Option<Box<str>> {
    pv.metadata.name.as_deref().map(Box::from)
}

/// The record of a PV, or None when it is of no interest: not a CSI volume, no volume handle,
/// or not bound to a claim.
pub fn pv_record(pv: WatchedPv) -> Option<(Box<str>, PvRecord)> {
    let deleting = pv.metadata.deletion_timestamp.is_some();
    let name = pv.metadata.name?;
    let spec = pv.spec?;
    let csi = spec.csi?;
    let claim_ref = spec.claim_ref?;
    if csi.volume_handle.is_empty() {
        return None;
    }
    let record = PvRecord {
        driver: csi.driver.into(),
        volume_handle: csi.volume_handle.into(),
        claim: ClaimKey {
            namespace: claim_ref.namespace?,
            name: claim_ref.name?,
        },
        claim_uid: claim_ref.uid.map(Into::into),
        deleting,
    };
    Some((name.into(), record))
}

/// A claim's cache key: its namespace and name.
pub fn pvc_key(pvc: &WatchedPvc) -> Option<ClaimKey> {
    Some(ClaimKey {
        namespace: pvc.metadata.namespace.clone()?,
        name: pvc.metadata.name.clone()?,
    })
}

/// The record of a claim (every named claim has one).
pub fn pvc_record(pvc: WatchedPvc) -> Option<(ClaimKey, PvcRecord)> {
    let key = ClaimKey {
        namespace: pvc.metadata.namespace?,
        name: pvc.metadata.name?,
    };
    let (phase, health) = pvc
        .status
        .map(|s| (s.phase, s.health_status))
        .unwrap_or_default();
    let health_annotation = pvc
        .metadata
        .annotations
        .and_then(|mut a| a.remove(HEALTH_ANNOTATION))
        .map(Into::into);
    let record = PvcRecord {
        health_annotation,
        uid: pvc.metadata.uid.unwrap_or_default().into(),
        resource_version: pvc.metadata.resource_version.map(Into::into),
        volume_name: pvc.spec.and_then(|s| s.volume_name).map(Into::into),
        phase_bound: phase.as_deref() == Some("Bound"),
        health,
    };
    Some((key, record))
}

/// Joins the PVs of `driver` with the claims bound to them: claimRef and `spec.volumeName` agree,
/// the claim's phase is Bound, and its uid is the one the PV names (when it names one).
pub fn map_bound_claims(
    driver: &str,
    pvs: &HashMap<Box<str>, PvRecord>,
    pvcs: &HashMap<ClaimKey, PvcRecord>,
) -> BTreeMap<String, BoundClaim> {
    let mut out = BTreeMap::new();
    for (pv_name, pv) in pvs {
        // A PV being deleted is not probed (as upstream's sidecar skips it).
        if &*pv.driver != driver || pv.deleting {
            continue;
        }
        let Some(pvc) = pvcs.get(&pv.claim) else {
            continue;
        };
        let bound_here = pvc.volume_name.as_deref() == Some(&**pv_name);
        let uid_matches = pv.claim_uid.as_ref().is_none_or(|want| *want == pvc.uid);
        if !(bound_here && pvc.phase_bound && uid_matches) {
            continue;
        }
        out.insert(
            pv.volume_handle.to_string(),
            BoundClaim {
                volume_id: pv.volume_handle.to_string(),
                pv_name: pv_name.to_string(),
                key: pv.claim.clone(),
                stored: pvc.stored(),
            },
        );
    }
    out
}

/// Whether the claim `claim`, still the object `uid` and still naming `pv_name` in its
/// `spec.volumeName`, has lost that volume: the PV is gone, or is being deleted. Its health
/// then came from a volume that no longer exists. A claim recreated under the same name (another
/// uid) or bound to another volume is not such a claim.
pub fn is_released(
    pv_name: &str,
    claim: &ClaimKey,
    uid: &str,
    pvs: &HashMap<Box<str>, PvRecord>,
    pvcs: &HashMap<ClaimKey, PvcRecord>,
) -> bool {
    let volume_gone = pvs.get(pv_name).is_none_or(|pv| pv.deleting);
    still_names(pv_name, claim, uid, pvcs) && volume_gone
}

/// Whether the claim `claim` is still the object `uid` and still names `pv_name` in its
/// `spec.volumeName`, bound or not: the health it got from that volume may still need clearing.
pub fn still_names(
    pv_name: &str,
    claim: &ClaimKey,
    uid: &str,
    pvcs: &HashMap<ClaimKey, PvcRecord>,
) -> bool {
    pvcs.get(claim)
        .is_some_and(|pvc| &*pvc.uid == uid && pvc.volume_name.as_deref() == Some(pv_name))
}

/// PV and PVC objects as the API server sends them, decoded and compacted as the watch does.
#[cfg(test)]
pub mod fixtures {
    use super::*;
    use serde_json::{Value, json};

    /// A PV of `driver` for `volume_id`, bound to `ns/claim` (or unbound when `claim` is None).
    pub fn pv_json(
        name: &str,
        driver: &str,
        volume_id: &str,
        claim: Option<(&str, &str)>,
    ) -> Value {
        let mut spec = json!({
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "fast",
            "csi": {"driver": driver, "volumeHandle": volume_id, "fsType": "ext4",
                    "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "x"}},
        });
        if let Some((ns, n)) = claim {
            spec["claimRef"] = json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                     "namespace": ns, "name": n, "uid": format!("uid-{n}"),
                                     "resourceVersion": "12"});
        }
        json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "uid": format!("pv-uid-{name}"), "resourceVersion": "7",
                         "labels": {"zone": "a"},
                         "annotations": {"pv.kubernetes.io/provisioned-by": driver},
                         "finalizers": ["kubernetes.io/pv-protection"],
                         "managedFields": [{"manager": "csi-provisioner", "operation": "Update",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
            "spec": spec,
            "status": {"phase": "Bound"}
        })
    }

    /// A claim `ns/name` on `volume_name` in `phase`.
    pub fn pvc_json(ns: &str, name: &str, volume_name: &str, phase: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                         "resourceVersion": "1", "annotations": {"big": "x".repeat(4096)},
                         "labels": {"app": "web"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                     "resources": {"requests": {"storage": "1Gi"}},
                     "volumeName": (!volume_name.is_empty()).then_some(volume_name)},
            "status": {"phase": phase, "capacity": {"storage": "1Gi"},
                       "accessModes": ["ReadWriteOnce"]}
        })
    }

    /// The PV caches' contents for `objects`.
    pub fn pvs(objects: &[Value]) -> HashMap<Box<str>, PvRecord> {
        objects
            .iter()
            .filter_map(|o| pv_record(serde_json::from_value(o.clone()).unwrap()))
            .collect()
    }

    /// The PVC caches' contents for `objects`.
    pub fn pvcs(objects: &[Value]) -> HashMap<ClaimKey, PvcRecord> {
        objects
            .iter()
            .filter_map(|o| pvc_record(serde_json::from_value(o.clone()).unwrap()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use serde_json::json;

    #[test]
    fn maps_only_bound_volumes_of_the_driver() {
        let pvs = pvs(&[
            pv_json("pv-a", "d", "vol-a", Some(("ns", "a"))),
            pv_json("pv-b", "d", "vol-b", Some(("ns", "b"))),
            pv_json("pv-c", "other", "vol-c", Some(("ns", "c"))),
            pv_json("pv-d", "d", "vol-d", None),
            pv_json("pv-e", "d", "vol-e", Some(("ns", "e"))),
            pv_json("pv-f", "d", "", Some(("ns", "f"))),
        ]);
        let pvcs = pvcs(&[
            pvc_json("ns", "a", "pv-a", "Bound"),
            pvc_json("ns", "b", "pv-b", "Pending"),
            pvc_json("ns", "c", "pv-c", "Bound"),
            pvc_json("ns", "e", "pv-elsewhere", "Bound"),
            pvc_json("ns", "f", "pv-f", "Bound"),
        ]);
        assert!(!pvs.contains_key("pv-d"), "an unbound PV is not kept");
        let m = map_bound_claims("d", &pvs, &pvcs);
        assert_eq!(m.keys().collect::<Vec<_>>(), vec!["vol-a"]);
        let a = &m["vol-a"];
        assert_eq!(
            a.key,
            ClaimKey {
                namespace: "ns".into(),
                name: "a".into()
            }
        );
        assert_eq!(a.pv_name, "pv-a");
        assert_eq!(a.stored.uid, "uid-a");
        assert_eq!(a.stored.resource_version.as_deref(), Some("1"));
        assert_eq!(a.stored.health, None);
    }

    #[test]
    fn a_pv_being_deleted_is_not_probed_and_releases_its_claim() {
        let mut deleting = pv_json("pv-a", "d", "vol-a", Some(("ns", "a")));
        deleting["metadata"]["deletionTimestamp"] = json!("2026-12-04T10:00:00Z");
        let live = pv_json("pv-b", "d", "vol-b", Some(("ns", "b")));
        let pvs = pvs(&[deleting, live]);
        let pvcs = pvcs(&[
            pvc_json("ns", "a", "pv-a", "Bound"),
            pvc_json("ns", "b", "pv-b", "Bound"),
            pvc_json("ns", "c", "pv-gone", "Bound"),
            pvc_json("ns", "d", "pv-other", "Bound"),
        ]);
        let key = |n: &str| ClaimKey {
            namespace: "ns".into(),
            name: n.into(),
        };
        assert_eq!(
            map_bound_claims("d", &pvs, &pvcs)
                .keys()
                .collect::<Vec<_>>(),
            vec!["vol-b"]
        );
        for (pv, claim, uid, released, why) in [
            ("pv-a", "a", "uid-a", true, "being deleted"),
            ("pv-gone", "c", "uid-c", true, "gone"),
            ("pv-b", "b", "uid-b", false, "still there"),
            ("pv-a", "a", "another-uid", false, "the claim was recreated"),
            (
                "pv-gone",
                "d",
                "uid-d",
                false,
                "the claim names another volume now",
            ),
            ("pv-gone", "zz", "uid-zz", false, "no claim"),
        ] {
            assert_eq!(
                is_released(pv, &key(claim), uid, &pvs, &pvcs),
                released,
                "{pv} for {claim} ({uid}): {why}"
            );
        }
    }

    #[test]
    fn a_claim_out_of_bound_still_names_its_volume_until_recreated_or_rebound() {
        let lost = pvc_json("ns", "a", "pv-a", "Lost");
        let mut recreated = pvc_json("ns", "b", "pv-b", "Bound");
        recreated["metadata"]["uid"] = json!("someone-else");
        let pvcs = pvcs(&[lost, recreated, pvc_json("ns", "c", "pv-other", "Bound")]);
        let key = |n: &str| ClaimKey {
            namespace: "ns".into(),
            name: n.into(),
        };
        assert!(
            still_names("pv-a", &key("a"), "uid-a", &pvcs),
            "lost, same claim"
        );
        assert!(!still_names("pv-b", &key("b"), "uid-b", &pvcs), "recreated");
        assert!(!still_names("pv-c", &key("c"), "uid-c", &pvcs), "rebound");
        assert!(!still_names("pv-d", &key("d"), "uid-d", &pvcs), "no claim");
    }

    #[test]
    fn a_claim_recreated_with_another_uid_is_not_the_bound_one() {
        let pvs = pvs(&[pv_json("pv-a", "d", "vol-a", Some(("ns", "a")))]);
        let mut c = pvc_json("ns", "a", "pv-a", "Bound");
        c["metadata"]["uid"] = json!("someone-else");
        assert!(map_bound_claims("d", &pvs, &pvcs(&[c])).is_empty());
    }

    #[test]
    fn the_stored_health_is_read_and_everything_else_skipped() {
        let mut c = pvc_json("ns", "a", "pv-a", "Bound");
        c["status"]["healthStatus"] = json!({"healthConditions": [{
            "status": "Inaccessible", "reason": "VolumeNotFound", "message": "gone",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        let decoded: WatchedPvc = serde_json::from_value(c).unwrap();
        assert!(decoded.metadata.annotations.is_none() && decoded.metadata.labels.is_none());
        let (key, record) = pvc_record(decoded).unwrap();
        assert_eq!(key.to_string(), "ns/a");
        let conditions = record
            .health
            .as_ref()
            .and_then(|h| h.health_conditions.as_deref())
            .unwrap();
        assert_eq!(conditions[0].reason, "VolumeNotFound");

        let pv: WatchedPv =
            serde_json::from_value(pv_json("pv-a", "d", "vol-a", Some(("ns", "a")))).unwrap();
        assert!(pv.metadata.managed_fields.is_none() && pv.metadata.finalizers.is_none());
        assert_eq!(pv_key(&pv).as_deref(), Some("pv-a"));
    }

    #[test]
    fn objects_missing_fields_decode_and_are_left_out() {
        // Nothing the monitor reads is required: an object without it is kept out, not an error
        // that would fail the whole list page.
        let pv: WatchedPv = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        assert!(pv_record(pv).is_none());
        let pvc: WatchedPvc = serde_json::from_value(json!({"metadata": {}})).unwrap();
        assert!(pvc_key(&pvc).is_none() && pvc_record(pvc).is_none());
        let pvc: WatchedPvc =
            serde_json::from_value(json!({"metadata": {"namespace": "n", "name": "c"}})).unwrap();
        let (_, r) = pvc_record(pvc).unwrap();
        assert!(!r.phase_bound && r.volume_name.is_none());
    }

    #[test]
    fn a_record_is_small() {
        // What the caches used to hold per object, whole structs, against a record.
        let whole = size_of::<PersistentVolume>() + size_of::<PersistentVolumeClaim>();
        let record = size_of::<PvRecord>() + size_of::<PvcRecord>();
        assert!(
            record * 10 < whole,
            "records {record} bytes against objects {whole}"
        );
    }
}
