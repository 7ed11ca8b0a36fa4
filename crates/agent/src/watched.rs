//! What the agent reads of the objects it watches and gets, decoded into types holding only
//! those fields: every other field is skipped while decoding, never allocated, and the decoders
//! of the whole k8s-openapi `Pod`, `PersistentVolume` and `Node` are not linked into the agent.
//!
//! - [`WatchedPod`]: identity, `spec.volumes` (name, claim, generic ephemeral, inline CSI driver),
//!   `status.phase` and `status.volumeHealth`. The pod watch keeps these, not whole pods.
//! - [`WatchedPvc`]: the volume it is bound to. [`WatchedPv`]: its CSI driver and handle (the
//!   records of `volhealth_kube_access::watched`, shared with the monitor).
//! - [`WatchedNode`]: its uid (the owner of the CSINode).

use k8s_openapi::api::core::v1::PodVolumeHealth;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// A pod, decoded for what the agent reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct WatchedPod {
    /// Name, namespace, uid and resourceVersion only.
    #[serde(deserialize_with = "volhealth_kube_access::partial::slim_meta")]
    pub metadata: ObjectMeta,
    /// `spec.volumes`.
    pub spec: Option<PodSpec>,
    /// `status.phase` and `status.volumeHealth`.
    pub status: Option<PodStatus>,
}

/// The part of `pod.spec` the agent reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PodSpec {
    /// `spec.volumes`, in order.
    pub volumes: Option<Vec<PodVolume>>,
}

/// One `pod.spec.volumes` entry, for what decides whether it may be a CSI volume.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodVolume {
    /// The volume's name in the pod.
    pub name: String,
    /// A PVC source.
    pub persistent_volume_claim: Option<ClaimSource>,
    /// A generic ephemeral volume (its contents are not read: the claim's name follows from
    /// the pod's and the volume's).
    pub ephemeral: Option<IgnoredAny>,
    /// An inline CSI volume.
    pub csi: Option<InlineCsi>,
}

/// `persistentVolumeClaim` of a pod volume.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimSource {
    /// The PVC's name in the pod's namespace.
    pub claim_name: String,
}

/// `csi` of a pod volume.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct InlineCsi {
    /// The CSI driver's name.
    pub driver: String,
}

/// The part of `pod.status` the agent reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodStatus {
    /// `status.phase`.
    pub phase: Option<String>,
    /// `status.volumeHealth`, as stored.
    pub volume_health: Option<Vec<PodVolumeHealth>>,
}

volhealth_kube_access::resource_as!(WatchedPod, Pod);

/// The claim and volume records are the ones both writers read.
pub use volhealth_kube_access::watched::{WatchedPv, WatchedPvc};

/// A node, decoded for its identity.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct WatchedNode {
    #[serde(deserialize_with = "volhealth_kube_access::partial::slim_meta")]
    metadata: ObjectMeta,
}

impl WatchedNode {
    /// The node's uid.
    pub fn uid(&self) -> Option<&str> {
        self.metadata.uid.as_deref()
    }
}

volhealth_kube_access::resource_as!(WatchedNode, Node);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pod as the API server sends it, with the fields the agent skips.
    fn full_pod() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-0", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
                "labels": {"app": "web"}, "annotations": {"note": "x"},
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                    "name": "web", "uid": "s-1"}],
            },
            "spec": {
                "nodeName": "node-1",
                "containers": [{"name": "app", "image": "nginx",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "resources": {"requests": {"cpu": "100m"}}}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0", "readOnly": false}},
                    {"name": "tmp", "emptyDir": {"medium": "Memory"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
                    {"name": "inline", "csi": {"driver": "d.example.com",
                        "volumeAttributes": {"size": "1Gi"}}},
                ],
                "affinity": {"nodeAffinity": {}},
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0,
                    "image": "nginx", "imageID": "", "state": {"running": {}}}],
                "volumeHealth": [{"name": "data", "healthConditions": [{"type": "Degraded",
                    "status": "True", "reason": "Slow", "message": "m",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}],
            },
        })
    }

    #[test]
    fn a_pod_keeps_its_identity_volumes_phase_and_health_only() {
        let pod: WatchedPod = serde_json::from_value(full_pod()).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("web-0"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(pod.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("42"));
        assert!(pod.metadata.managed_fields.is_none() && pod.metadata.labels.is_none());
        let volumes = pod.spec.as_ref().unwrap().volumes.as_ref().unwrap();
        let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["data", "tmp", "scratch", "inline"]);
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "data-web-0"
        );
        assert!(volumes[1].persistent_volume_claim.is_none() && volumes[1].csi.is_none());
        assert!(volumes[1].ephemeral.is_none());
        assert!(volumes[2].ephemeral.is_some());
        assert_eq!(volumes[3].csi.as_ref().unwrap().driver, "d.example.com");
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let health = status.volume_health.as_ref().unwrap();
        assert_eq!(health[0].name, "data");
        assert_eq!(
            health[0].health_conditions.as_ref().unwrap()[0].reason,
            "Slow"
        );
    }

    #[test]
    fn a_pod_without_spec_or_status_decodes_to_none() {
        let pod: WatchedPod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        assert!(pod.spec.is_none() && pod.status.is_none());
        let pod: WatchedPod = serde_json::from_value(
            json!({"metadata": {"name": "p"}, "spec": {"volumes": null}, "status": {"volumeHealth": null}}),
        )
        .unwrap();
        assert!(pod.spec.unwrap().volumes.is_none());
        assert!(pod.status.unwrap().volume_health.is_none());
    }

    #[test]
    fn a_malformed_kept_field_is_an_error_not_a_default() {
        let bad = json!({"metadata": {"name": "p"}, "spec": {"volumes": [{"name": 7}]}});
        assert!(serde_json::from_value::<WatchedPod>(bad).is_err());
        let bad = json!({"metadata": {"name": "p"}, "status": {"volumeHealth": "yes"}});
        assert!(serde_json::from_value::<WatchedPod>(bad).is_err());
    }

    #[test]
    fn claims_volumes_and_nodes_keep_what_the_agent_reads() {
        let pvc: WatchedPvc = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"volumeName": "pv-1", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound"},
        }))
        .unwrap();
        assert_eq!(pvc.volume_name(), Some("pv-1"));
        let unbound: WatchedPvc =
            serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {"volumeName": ""}}))
                .unwrap();
        assert_eq!(unbound.volume_name(), None);

        let pv: WatchedPv = serde_json::from_value(json!({
            "metadata": {"name": "pv-1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "claimRef": {"namespace": "ns", "name": "c"},
                "csi": {"driver": "d.example.com", "volumeHandle": "vol-1", "fsType": "ext4",
                    "volumeAttributes": {"a": "b"}}},
        }))
        .unwrap();
        assert_eq!(pv.csi(), Some(("d.example.com", "vol-1")));
        let nfs: WatchedPv = serde_json::from_value(json!({
            "metadata": {"name": "pv-2"},
            "spec": {"nfs": {"server": "s", "path": "/"}},
        }))
        .unwrap();
        assert_eq!(nfs.csi(), None);

        let node: WatchedNode = serde_json::from_value(json!({
            "metadata": {"name": "node-1", "uid": "n-1"},
            "status": {"images": [{"names": ["a"], "sizeBytes": 1}],
                "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap();
        assert_eq!(node.uid(), Some("n-1"));
    }

    #[test]
    fn the_agents_partial_types_address_their_whole_types_resources() {
        // The claim and volume records are kube-access's, and tested there.
        use kube::Resource;
        assert_eq!(WatchedPod::plural(&()), "pods");
        assert_eq!(WatchedNode::plural(&()), "nodes");
    }
}
