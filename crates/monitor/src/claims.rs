//! Which claim a driver's volume belongs to: the boundary to the PV/PVC caches, and the pure mapping.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use std::collections::{BTreeMap, HashMap};
use volhealth_model::VolumeHealthStatus;

/// A PVC's namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimKey {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A claim as currently stored in the API server (seen through the cache).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoredClaim {
    /// The claim's uid (for Events).
    pub uid: String,
    /// Its resourceVersion, to tell whether the cache has caught up with our own writes.
    pub resource_version: Option<String>,
    /// `status.healthStatus` as stored.
    pub health: Option<VolumeHealthStatus>,
}

/// A volume of our driver whose PV is bound to a Bound claim.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundClaim {
    /// The CSI volume id (`pv.spec.csi.volumeHandle`).
    pub volume_id: String,
    /// The PV's name.
    pub pv_name: String,
    /// The claim.
    pub key: ClaimKey,
    /// The claim as stored.
    pub stored: StoredClaim,
}

/// Read access to the PV/PVC caches.
pub trait ClaimStore: Send + Sync + 'static {
    /// Every volume of `driver` that is bound to a Bound claim, by volume id.
    fn bound_claims(&self, driver: &str) -> BTreeMap<String, BoundClaim>;
    /// One claim as stored, if it exists.
    fn claim(&self, key: &ClaimKey) -> Option<StoredClaim>;
}

/// The claim's stored fields.
pub fn stored_claim(pvc: &PersistentVolumeClaim) -> StoredClaim {
    StoredClaim {
        uid: pvc.metadata.uid.clone().unwrap_or_default(),
        resource_version: pvc.metadata.resource_version.clone(),
        health: pvc.status.as_ref().and_then(|s| s.health_status.clone()),
    }
}

/// Joins PVs of `driver` with the claims bound to them (claimRef and `spec.volumeName` agree, phase Bound).
pub fn map_bound_claims<'a>(
    driver: &str,
    pvs: impl IntoIterator<Item = &'a PersistentVolume>,
    pvcs: impl IntoIterator<Item = &'a PersistentVolumeClaim>,
) -> BTreeMap<String, BoundClaim> {
    let claims: HashMap<(&str, &str), &PersistentVolumeClaim> = pvcs
        .into_iter()
        .filter_map(|c| {
            Some((
                (
                    c.metadata.namespace.as_deref()?,
                    c.metadata.name.as_deref()?,
                ),
                c,
            ))
        })
        .collect();
    let mut out = BTreeMap::new();
    for pv in pvs {
        let Some(spec) = pv.spec.as_ref() else {
            continue;
        };
        let Some(csi) = spec.csi.as_ref() else {
            continue;
        };
        if csi.driver != driver || csi.volume_handle.is_empty() {
            continue;
        }
        let Some(pv_name) = pv.metadata.name.as_deref() else {
            continue;
        };
        let Some(claim_ref) = spec.claim_ref.as_ref() else {
            continue;
        };
        let (Some(ns), Some(name)) = (claim_ref.namespace.as_deref(), claim_ref.name.as_deref())
        else {
            continue;
        };
        let Some(pvc) = claims.get(&(ns, name)) else {
            continue;
        };
        let bound_here = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == Some(pv_name);
        let phase_bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let uid_matches = match (&claim_ref.uid, &pvc.metadata.uid) {
            (Some(want), Some(have)) => want == have,
            _ => true,
        };
        if !(bound_here && phase_bound && uid_matches) {
            continue;
        }
        out.insert(
            csi.volume_handle.clone(),
            BoundClaim {
                volume_id: csi.volume_handle.clone(),
                pv_name: pv_name.to_string(),
                key: ClaimKey {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                },
                stored: stored_claim(pvc),
            },
        );
    }
    out
}

/// Builders for PV/PVC objects, shared by the unit tests.
#[cfg(test)]
pub mod fixtures {
    use k8s_openapi::api::core::v1::{
        CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
        PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A PV of `driver` for `volume_id`, bound to `ns/claim` (or unbound when `claim` is None).
    pub fn pv(
        name: &str,
        driver: &str,
        volume_id: &str,
        claim: Option<(&str, &str)>,
    ) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                csi: Some(CSIPersistentVolumeSource {
                    driver: driver.into(),
                    volume_handle: volume_id.into(),
                    ..Default::default()
                }),
                claim_ref: claim.map(|(ns, n)| ObjectReference {
                    namespace: Some(ns.into()),
                    name: Some(n.into()),
                    uid: Some(format!("uid-{n}")),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A claim `ns/name` on `volume_name` in `phase`.
    pub fn pvc(ns: &str, name: &str, volume_name: &str, phase: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                volume_name: (!volume_name.is_empty()).then(|| volume_name.into()),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{pv, pvc};
    use super::*;

    #[test]
    fn maps_only_bound_volumes_of_the_driver() {
        let pvs = vec![
            pv("pv-a", "d", "vol-a", Some(("ns", "a"))),
            pv("pv-b", "d", "vol-b", Some(("ns", "b"))),
            pv("pv-c", "other", "vol-c", Some(("ns", "c"))),
            pv("pv-d", "d", "vol-d", None),
            pv("pv-e", "d", "vol-e", Some(("ns", "e"))),
        ];
        let pvcs = vec![
            pvc("ns", "a", "pv-a", "Bound"),
            pvc("ns", "b", "pv-b", "Pending"),
            pvc("ns", "c", "pv-c", "Bound"),
            pvc("ns", "e", "pv-elsewhere", "Bound"),
        ];
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
    }

    #[test]
    fn a_claim_recreated_with_another_uid_is_not_the_bound_one() {
        let pvs = vec![pv("pv-a", "d", "vol-a", Some(("ns", "a")))];
        let mut c = pvc("ns", "a", "pv-a", "Bound");
        c.metadata.uid = Some("someone-else".into());
        assert!(map_bound_claims("d", &pvs, &[c]).is_empty());
    }
}
