//! The watched PersistentVolumes and PersistentVolumeClaims, decoded for what the writers read:
//! one definition for both writers (the monitor joins claims with their volumes and reads the
//! stored health; the agent follows a pod's claim to its volume's CSI driver and handle). Every
//! other field, managedFields and annotations among them, is skipped while decoding, never
//! allocated, and the decoders of the whole k8s-openapi types are not linked.
//!
//! The records carry the union of the fields the two writers read; each reads its part through
//! the accessors or the public fields.

use crate::partial::{slim_meta, slim_meta_keeping};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, VolumeHealthStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// The annotation vSphere's CSI syncer writes on a claim: `accessible` or `inaccessible`. The
/// only annotation a [`WatchedPvc`] keeps.
pub const HEALTH_ANNOTATION: &str = "volumehealth.storage.kubernetes.io/health";

/// A PersistentVolume, decoded for its CSI driver and volume handle and its claim.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct WatchedPv {
    /// Name, uid, resourceVersion and deletionTimestamp only.
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    /// `spec.csi` and `spec.claimRef`.
    pub spec: Option<PvSpec>,
}

/// The part of `pv.spec` the writers read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PvSpec {
    /// `spec.csi`: set for a CSI volume.
    pub csi: Option<PvCsi>,
    /// `spec.claimRef`: the claim the volume is bound to.
    pub claim_ref: Option<PvClaimRef>,
}

/// `pv.spec.csi`, for its driver and handle.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PvCsi {
    /// The CSI driver's name.
    pub driver: String,
    /// The volume's id at the driver.
    pub volume_handle: String,
}

/// `pv.spec.claimRef`, for the claim's identity.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PvClaimRef {
    /// The claim's namespace.
    pub namespace: Option<String>,
    /// The claim's name.
    pub name: Option<String>,
    /// The claim's uid, when the binding recorded it.
    pub uid: Option<String>,
}

impl WatchedPv {
    /// The CSI driver and volume handle, when it is a CSI PV.
    pub fn csi(&self) -> Option<(&str, &str)> {
        let csi = self.spec.as_ref()?.csi.as_ref()?;
        Some((&csi.driver, &csi.volume_handle))
    }
}

crate::resource_as!(WatchedPv, PersistentVolume);

/// A PersistentVolumeClaim, decoded for the volume it is bound to, its phase, its stored health
/// and the [`HEALTH_ANNOTATION`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct WatchedPvc {
    /// Name, namespace, uid, resourceVersion, deletionTimestamp and the
    /// [`HEALTH_ANNOTATION`] only.
    #[serde(deserialize_with = "meta_with_health_annotation")]
    pub metadata: ObjectMeta,
    /// `spec.volumeName`.
    pub spec: Option<PvcSpec>,
    /// `status.phase` and `status.healthStatus`.
    pub status: Option<PvcStatus>,
}

fn meta_with_health_annotation<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<ObjectMeta, D::Error> {
    slim_meta_keeping(d, HEALTH_ANNOTATION)
}

/// The part of `pvc.spec` the writers read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PvcSpec {
    /// The PV it is bound to.
    pub volume_name: Option<String>,
}

/// The part of `pvc.status` the writers read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PvcStatus {
    /// `status.phase` (`Bound`, `Pending`, `Lost`).
    pub phase: Option<String>,
    /// `status.healthStatus`, as stored.
    pub health_status: Option<VolumeHealthStatus>,
}

impl WatchedPvc {
    /// The PV it is bound to, when it names one.
    pub fn volume_name(&self) -> Option<&str> {
        self.spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .filter(|n| !n.is_empty())
    }
}

crate::resource_as!(WatchedPvc, PersistentVolumeClaim);

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;
    use serde_json::json;

    #[test]
    fn a_pv_keeps_its_driver_handle_and_claim_only() {
        let pv: WatchedPv = serde_json::from_value(json!({
            "metadata": {"name": "pv-1", "labels": {"a": "b"},
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"capacity": {"storage": "1Gi"},
                "claimRef": {"namespace": "ns", "name": "c", "uid": "u"},
                "csi": {"driver": "d.example.com", "volumeHandle": "vol-1", "fsType": "ext4"}},
        }))
        .unwrap();
        assert_eq!(pv.csi(), Some(("d.example.com", "vol-1")));
        let claim = pv.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
        assert_eq!(
            (
                claim.namespace.as_deref(),
                claim.name.as_deref(),
                claim.uid.as_deref()
            ),
            (Some("ns"), Some("c"), Some("u"))
        );
        assert!(pv.metadata.labels.is_none() && pv.metadata.managed_fields.is_none());
    }

    #[test]
    fn a_claim_keeps_its_volume_phase_health_and_the_health_annotation_only() {
        let pvc: WatchedPvc = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "annotations": {
                HEALTH_ANNOTATION: "inaccessible", "other": "x"}},
            "spec": {"volumeName": "pv-1"},
            "status": {"phase": "Bound", "healthStatus": {"healthConditions": [{
                "status": "Inaccessible", "reason": "Gone", "message": "m"}]}},
        }))
        .unwrap();
        assert_eq!(pvc.volume_name(), Some("pv-1"));
        let annotations = pvc.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations.len(), 1);
        assert_eq!(annotations[HEALTH_ANNOTATION], "inaccessible");
        let status = pvc.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Bound"));
        assert!(status.health_status.is_some());
    }

    #[test]
    fn the_partial_types_address_their_whole_types_resources() {
        assert_eq!(WatchedPvc::plural(&()), "persistentvolumeclaims");
        assert_eq!(WatchedPv::plural(&()), "persistentvolumes");
        assert_eq!(WatchedPvc::api_version(&()), "v1");
        assert_eq!(WatchedPvc::kind(&()), "PersistentVolumeClaim");
    }
}
