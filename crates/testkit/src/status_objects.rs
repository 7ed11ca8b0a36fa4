//! What `volhealth status` reports on, in one small cluster: a claim of [`DRIVER`], the pod that
//! mounts it and the CSINode of its node, first healthy, then each with an unhealthy condition in
//! its own field (the claim's controller side, the pod's node side, the node's backend).

use crate::DRIVER;
use crate::kube_client::client_for;
use crate::world::create;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use std::path::Path;

/// Creates namespace `other`, PV `pv-1` of [`DRIVER`], claim `default/data-1` bound to it, pod
/// `default/web-1` on `node-1` mounting the claim as volume `data`, and the CSINode `node-1`
/// with the driver; all healthy. As the admin of `kubeconfig`.
pub async fn seed_claim_pod_and_csinode(kubeconfig: &Path) {
    let client = &client_for(kubeconfig).await;
    create::<Namespace>(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "other"}}),
    )
    .await;
    create::<PersistentVolume>(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "pv-1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "csi": {"driver": DRIVER, "volumeHandle": "vh-1"}}}),
    )
    .await;
    create::<PersistentVolumeClaim>(
        &Api::namespaced(client.clone(), "default"),
        json!({"metadata": {"name": "data-1"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "volumeName": "pv-1"}}),
    )
    .await;
    create::<Pod>(
        &Api::namespaced(client.clone(), "default"),
        json!({"metadata": {"name": "web-1"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "web", "image": "nginx"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-1"}}]}}),
    )
    .await;
    create::<CSINode>(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "node-1"},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": "node-1"}]}}),
    )
    .await;
}

/// Makes all three objects of [`seed_claim_pod_and_csinode`] unhealthy: the claim
/// `Inaccessible`/`VolumeNotFound`, the pod's volume `Degraded`/`SlowIo`, and the node's storage
/// `StorageUnreachable`/`BackendDown` for ReadWriteOnce. As the admin of `kubeconfig`.
pub async fn make_all_three_unhealthy(kubeconfig: &Path) {
    let client = &client_for(kubeconfig).await;
    let params = PatchParams::default();
    let status = |status: Value| Patch::Merge(json!({ "status": status }));
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), "default")
        .patch_status("data-1", &params, &status(json!({"healthStatus": {
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "healthConditions": [{"status": "Inaccessible", "reason": "VolumeNotFound", "message": "gone"}]}})))
        .await
        .unwrap_or_else(|e| panic!("patching the status of claim data-1: {e}"));
    Api::<Pod>::namespaced(client.clone(), "default")
        .patch_status("web-1", &params, &status(json!({"volumeHealth": [{"name": "data",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "healthConditions": [{"status": "Degraded", "reason": "SlowIo", "message": "slow"}]}]})))
        .await
        .unwrap_or_else(|e| panic!("patching the status of pod web-1: {e}"));
    Api::<CSINode>::all(client.clone())
        .patch_status(
            "node-1",
            &params,
            &status(json!({"storageHealth": [{"name": DRIVER,
            "healthConditions": [{"status": "StorageUnreachable", "reason": "BackendDown",
                "accessMode": "ReadWriteOnce", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]})),
        )
        .await
        .unwrap_or_else(|e| panic!("patching the status of CSINode node-1: {e}"));
}
