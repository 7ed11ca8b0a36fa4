//! Node scoping, with the embedded API server's Node authorizer and the agent in this process. A
//! node's credentials cannot write another node's pods or CSINode, nor read the claims and volumes
//! of another node's pods, and an agent whose node name does not match its credentials stops
//! loudly instead of writing: `volhealth_agent::run` returns an error naming the mismatch.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{WAIT, World};
use volhealth_testkit::{client_for, run_agent, token_kubeconfig, wait_until};

/// Asserts that the API server refused a request as 403 Forbidden (`what` names a success).
fn assert_forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    let err = result.expect_err(what);
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{what}: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_scoping_protects_other_nodes() {
    let w = World::start().await;
    let uid_b = w.pod_with_volume("on-b", "vol-b", "node-b").await;
    let _ = uid_b;
    let node_a = client_for(&token_kubeconfig(w.dir.path(), &w.api.url, "nodeatok")).await;
    // node-a may not write the status of a pod bound to node-b ...
    let patch = json!({"status": {"volumeHealth": [{"name": "data", "healthConditions": [
        {"status": "Degraded", "reason": "Forged"}]}]}});
    assert_forbidden(
        Api::<Pod>::namespaced(node_a.clone(), "default")
            .patch_status("on-b", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
        "node-a patched a pod of node-b",
    );
    // ... nor create or write node-b's CSINode.
    let csinode_b: CSINode =
        serde_json::from_value(json!({"metadata": {"name": "node-b"}, "spec": {"drivers": []}}))
            .unwrap();
    assert_forbidden(
        Api::<CSINode>::all(node_a.clone())
            .create(&PostParams::default(), &csinode_b)
            .await,
        "created",
    );
    Api::<CSINode>::all(w.admin.clone())
        .create(&PostParams::default(), &csinode_b)
        .await
        .expect("admin creates");
    let status = json!({"status": {"storageHealth": null}});
    assert_forbidden(
        Api::<CSINode>::all(node_a)
            .patch_status("node-b", &PatchParams::default(), &Patch::Merge(&status))
            .await,
        "node-a patched node-b's CSINode",
    );
    Api::<CSINode>::all(w.admin.clone())
        .delete("node-b", &Default::default())
        .await
        .expect("delete csinode");

    // Claims and volumes, as kube's Node authorizer: node-a gets those of its own pods, one by
    // name; not node-b's, and it lists neither.
    w.pod_with_volume("on-a", "vol-a", "node-a").await;
    let node_a = client_for(&token_kubeconfig(w.dir.path(), &w.api.url, "nodeatok")).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(node_a.clone(), "default");
    let volumes = Api::<PersistentVolume>::all(node_a.clone());
    claims.get("claim-on-a").await.expect("its pod's claim");
    volumes.get("pv-on-a").await.expect("its pod's volume");
    assert_forbidden(claims.get("claim-on-b").await, "got claim-on-b");
    assert_forbidden(volumes.get("pv-on-b").await, "got pv-on-b");
    assert_forbidden(claims.list(&Default::default()).await, "listed claims");
    assert_forbidden(volumes.list(&Default::default()).await, "listed volumes");

    // An agent told it is node-b while holding node-a's token stops at its first write, loudly:
    // its `run` ends by itself with an error that names the mismatch.
    let agent = run_agent(
        "agent-misconfigured",
        w.agent_config("nodeatok", "node-b", None),
    );
    wait_until(WAIT, "the misconfigured agent to exit", || async {
        agent.ended()
    })
    .await;
    let error = agent
        .stop()
        .expect_err("the misconfigured agent must fail")
        .to_string();
    assert!(
        error.contains("does not match the node the credentials belong to"),
        "{error}"
    );
    let b = Api::<Pod>::namespaced(w.admin.clone(), "default")
        .get("on-b")
        .await
        .unwrap();
    assert!(b.status.and_then(|s| s.volume_health).is_none());
    assert!(
        w.csinode_named("node-b").await.is_none(),
        "nothing was written for node-b"
    );
}
