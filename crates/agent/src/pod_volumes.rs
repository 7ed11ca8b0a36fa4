//! Which of a pod's volumes are CSI volumes, and how the kubelet names them.

use crate::watched::{WatchedPod, WatchedPv};
use sha2::{Digest, Sha256};

/// A CSI volume used by a pod, resolved to its driver and volume handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiVolume {
    /// The `pod.spec.volumes` name (the key of `pod.status.volumeHealth`).
    pub name: String,
    /// CSI driver name.
    pub driver: String,
    /// The volume handle passed to NodeGetVolumeHealth.
    pub volume_handle: String,
    /// The directory name the kubelet uses under the pod's volumes: the PV name, or the volume name when inline.
    pub dir_name: String,
    /// Inline (ephemeral) CSI volumes are never staged.
    pub inline: bool,
}

/// What a `pod.spec.volumes` entry refers to, before PVCs are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeRef {
    /// A PVC (directly, or the one a generic ephemeral volume creates).
    Claim {
        /// The PVC name in the pod's namespace.
        claim: String,
    },
    /// An inline CSI volume, already complete.
    Inline(CsiVolume),
}

/// The pod's volumes that may be CSI volumes, in `pod.spec.volumes` order.
pub fn volume_refs(pod: &WatchedPod) -> Vec<(String, VolumeRef)> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for vol in spec.volumes.iter().flatten() {
        if let Some(pvc) = &vol.persistent_volume_claim {
            out.push((
                vol.name.clone(),
                VolumeRef::Claim {
                    claim: pvc.claim_name.clone(),
                },
            ));
        } else if vol.ephemeral.is_some() {
            // A generic ephemeral volume's claim is named <pod>-<volume>.
            out.push((
                vol.name.clone(),
                VolumeRef::Claim {
                    claim: format!("{pod_name}-{}", vol.name),
                },
            ));
        } else if let Some(csi) = &vol.csi {
            out.push((
                vol.name.clone(),
                VolumeRef::Inline(CsiVolume {
                    name: vol.name.clone(),
                    driver: csi.driver.clone(),
                    volume_handle: inline_volume_handle(uid, &vol.name),
                    dir_name: vol.name.clone(),
                    inline: true,
                }),
            ));
        }
    }
    out
}

/// The handle the kubelet gives an inline CSI volume: `csi-` + sha256 hex of pod UID and volume name.
pub fn inline_volume_handle(pod_uid: &str, volume_name: &str) -> String {
    let digest = Sha256::digest(format!("{pod_uid}{volume_name}").as_bytes());
    format!("csi-{}", hex::encode(digest))
}

/// The CSI driver and volume handle of a PV, when it is a CSI PV.
pub fn csi_of_pv(pv: &WatchedPv) -> Option<(String, String)> {
    let (driver, handle) = pv.csi()?;
    Some((driver.to_string(), handle.to_string()))
}

/// Whether the kubelet is done with this pod (its volumes are being or have been torn down).
pub fn is_terminal(pod: &WatchedPod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_claims_and_inline_csi_volumes_only() {
        let pod: WatchedPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "uid": "uid-1"},
            "spec": {"volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}},
                {"name": "tmp", "emptyDir": {}},
                {"name": "scratch", "csi": {"driver": "d.example.com"}},
                {"name": "cache", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            ]},
        }))
        .unwrap();
        let refs = volume_refs(&pod);
        assert_eq!(refs.len(), 3);
        assert_eq!(
            refs[0],
            (
                "data".into(),
                VolumeRef::Claim {
                    claim: "data-claim".into()
                }
            )
        );
        let VolumeRef::Inline(v) = &refs[1].1 else {
            panic!("inline expected")
        };
        assert_eq!(v.driver, "d.example.com");
        assert_eq!(v.dir_name, "scratch");
        assert!(v.inline);
        assert_eq!(v.volume_handle, inline_volume_handle("uid-1", "scratch"));
        assert!(v.volume_handle.starts_with("csi-") && v.volume_handle.len() == 4 + 64);
        assert_eq!(
            refs[2],
            (
                "cache".into(),
                VolumeRef::Claim {
                    claim: "web-cache".into()
                }
            ),
            "a generic ephemeral volume's claim is <pod>-<volume>"
        );
    }

    #[test]
    fn only_finished_pods_are_terminal() {
        let pod = |phase: &str| -> WatchedPod {
            serde_json::from_value(serde_json::json!({"status": {"phase": phase}})).unwrap()
        };
        assert!(is_terminal(&pod("Succeeded")) && is_terminal(&pod("Failed")));
        assert!(!is_terminal(&pod("Running")) && !is_terminal(&pod("Pending")));
        assert!(!is_terminal(&WatchedPod::default()));
    }
}
