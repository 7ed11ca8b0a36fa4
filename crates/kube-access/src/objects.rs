//! The lists inside Kubernetes objects that the API leaves out when they are empty (and whose
//! parent may be left out too), read as slices: an absent list and an empty one read the same.

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Volume};
use k8s_openapi::api::storage::v1::{CSINode, StorageHealth};

/// `pod.spec.volumes`, in order.
pub fn pod_volumes(pod: &Pod) -> &[Volume] {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default()
}

/// The claims `pod`'s persistentVolumeClaim volumes name, in `spec.volumes` order.
pub fn pod_claim_names(pod: &Pod) -> impl Iterator<Item = &str> {
    pod_volumes(pod)
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
}

/// `node.spec.taints`.
pub fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// `csinode.status.storageHealth`: one entry per driver that reports storage health.
pub fn storage_health(csinode: &CSINode) -> &[StorageHealth] {
    csinode
        .status
        .as_ref()
        .and_then(|s| s.storage_health.as_deref())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
        serde_json::from_value(value).expect("a valid object")
    }

    #[test]
    fn absent_parents_and_lists_read_as_empty() {
        let pod: Pod = from(json!({"metadata": {"name": "p"}}));
        let bare_spec: Pod = from(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}));
        for pod in [&pod, &bare_spec] {
            assert!(pod_volumes(pod).is_empty());
            assert_eq!(pod_claim_names(pod).count(), 0);
        }
        let node: Node = from(json!({"metadata": {"name": "n"}, "spec": {}}));
        assert!(node_taints(&node).is_empty());
        let csinode: CSINode = from(json!({"metadata": {"name": "n"}, "spec": {"drivers": []}}));
        assert!(storage_health(&csinode).is_empty());
    }

    #[test]
    fn present_lists_are_read_in_order() {
        let pod: Pod = from(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "volumes": [
                {"name": "a", "persistentVolumeClaim": {"claimName": "claim-a"}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "b", "persistentVolumeClaim": {"claimName": "claim-b"}},
            ]},
        }));
        let names: Vec<&str> = pod_volumes(&pod).iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["a", "scratch", "b"]);
        assert_eq!(
            pod_claim_names(&pod).collect::<Vec<_>>(),
            ["claim-a", "claim-b"]
        );
        let node: Node = from(json!({"metadata": {"name": "n"}, "spec": {"taints": [
            {"key": "k", "effect": "NoSchedule"},
        ]}}));
        assert_eq!(node_taints(&node)[0].key, "k");
        let csinode: CSINode = from(json!({
            "metadata": {"name": "n"},
            "spec": {"drivers": []},
            "status": {"storageHealth": [{"name": "d", "healthConditions": []}]},
        }));
        assert_eq!(storage_health(&csinode)[0].name, "d");
    }
}
