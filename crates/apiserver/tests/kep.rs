//! End-to-end tests of the KEP-1432 API rules in the API server: the CSIVolumeHealth gate
//! (drop on save, keep when the old object had the field), validation (422 with field paths)
//! and node-scoped authorization with a token file.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::{Value, json};

fn causes(v: &Value) -> Vec<String> {
    v["details"]["causes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| c["field"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// node-a's d.example.com driver reports `conditions` (a merge patch of its CSINode's status).
async fn driver_conditions(api: &Api, conditions: Value) -> Answer {
    let body = json!({"status": {"storageHealth": [{"name": "d.example.com", "healthConditions": conditions}]}});
    api.patch(&format!("{CSINODES}/node-a/status"), MERGE, &body)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_off_drops_new_fields_unless_the_old_object_had_them() {
    let dir = tempfile::tempdir().unwrap();
    // With the gate on, one PVC gets healthStatus.
    let server = support::start_apiserver(dir.path(), &[]);
    let api = Api::new(&server.url);
    for n in ["had", "new"] {
        api.create(PVCS, &pvc(n)).await;
    }
    let r = api.patch(&format!("{PVCS}/had/status"), MERGE, &json!({"status": {"healthStatus": {"healthConditions": conditions("Degraded", "Slow")}}})).await;
    assert_eq!(
        r.json["status"]["healthStatus"]["healthConditions"][0]["reason"],
        "Slow"
    );
    drop(server); // stops it, and waits until it has let go of its data

    // Same data, gate off.
    let server =
        support::start_apiserver(dir.path(), &["--feature-gates", "CSIVolumeHealth=false"]);
    let api = Api::new(&server.url);
    let body = json!({"status": {"phase": "Bound", "healthStatus": {"healthConditions": conditions("Inaccessible", "VolumeNotFound")}}});
    let dropped = api.patch(&format!("{PVCS}/new/status"), MERGE, &body).await;
    assert_eq!(dropped.code, 200, "{}", dropped.text);
    assert_eq!(dropped.json["status"]["phase"], "Bound");
    assert!(
        dropped.json["status"].get("healthStatus").is_none(),
        "{}",
        dropped.text
    );
    let kept = api.patch(&format!("{PVCS}/had/status"), MERGE, &body).await;
    assert_eq!(
        kept.json["status"]["healthStatus"]["healthConditions"][0]["reason"],
        "VolumeNotFound"
    );

    // Pods and CSINodes too.
    api.post(PODS, &pod("p", "node-a", "new")).await;
    let pv = api.patch(&format!("{PODS}/p/status"), MERGE, &json!({"status": {"volumeHealth": [{"name": "data", "healthConditions": conditions("DataLoss", "Bad")}]}})).await;
    assert_eq!(pv.code, 200);
    assert!(pv.json["status"].get("volumeHealth").is_none());
    api.post(CSINODES, &csinode("node-a", "d.example.com"))
        .await;
    let cn = driver_conditions(&api, conditions("StorageDegraded", "PvMissing")).await;
    assert_eq!(cn.code, 200);
    assert!(
        cn.json
            .get("status")
            .is_none_or(|s| s.get("storageHealth").is_none()),
        "{}",
        cn.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_answers_422_with_field_paths() {
    let (_dir, _server, api) = start_server(&[]);
    api.post(PVCS, &pvc("d")).await;
    let long_reason = "R".repeat(257);
    let mut seventeen = Vec::new();
    for i in 0..17 {
        seventeen.push(json!({"status": "Degraded", "reason": format!("R{i}")}));
    }
    let cases = [
        (
            json!([{"status": "Broken", "reason": "X"}]),
            "status.healthStatus.healthConditions[0].status",
        ),
        (
            json!([{"status": "Degraded", "reason": ""}]),
            "status.healthStatus.healthConditions[0].reason",
        ),
        (
            json!([{"status": "Degraded", "reason": long_reason}]),
            "status.healthStatus.healthConditions[0].reason",
        ),
        (
            json!([{"status": "Degraded", "reason": "X", "message": "m".repeat(1025)}]),
            "status.healthStatus.healthConditions[0].message",
        ),
        (
            json!([{"status": "Degraded", "reason": "X"}, {"status": "Degraded", "reason": "X"}]),
            "status.healthStatus.healthConditions[1]",
        ),
        (
            Value::Array(seventeen),
            "status.healthStatus.healthConditions",
        ),
    ];
    for (conds, field) in cases {
        let r = api
            .patch(
                &format!("{PVCS}/d/status"),
                MERGE,
                &json!({"status": {"healthStatus": {"healthConditions": conds}}}),
            )
            .await;
        assert_eq!(
            r.code_and_reason(),
            (422, Some("Invalid")),
            "{field}: {}",
            r.text
        );
        assert!(
            causes(&r.json).contains(&field.to_string()),
            "{field}: {}",
            r.text
        );
        assert!(
            r.message()
                .starts_with("PersistentVolumeClaim \"d\" is invalid: ")
        );
    }
    // Same status, different reasons: fine.
    let ok = api
        .patch(
            &format!("{PVCS}/d/status"),
            MERGE,
            &json!({"status": {"healthStatus": {"healthConditions": [
        {"status": "Degraded", "reason": "A"}, {"status": "Degraded", "reason": "B"}]}}}),
        )
        .await;
    assert_eq!(ok.code, 200, "{}", ok.text);

    api.post(PODS, &pod("p", "node-a", "d")).await;
    let r = api.patch(&format!("{PODS}/p/status"), STRATEGIC, &json!({"status": {"volumeHealth": [{"name": "nosuch", "healthConditions": conditions("Degraded", "X")}]}})).await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert_eq!(causes(&r.json), ["status.volumeHealth[0].name"]);
    let r = api.patch(&format!("{PODS}/p/status"), STRATEGIC, &json!({"status": {"volumeHealth": [{"name": "data", "healthConditions": conditions("Degraded", "X")}]}})).await;
    assert_eq!(r.code, 200, "{}", r.text);

    api.post(CSINODES, &csinode("node-a", "d.example.com"))
        .await;
    let r = api.patch(&format!("{CSINODES}/node-a/status"), MERGE, &json!({"status": {"storageHealth": [{"name": "other.example.com", "healthConditions": conditions("StorageDegraded", "X")}]}})).await;
    assert_eq!(
        causes(&r.json),
        ["status.storageHealth[0].name"],
        "{}",
        r.text
    );
    // A driver's conditions are keyed by (status, reason): a second capability is a duplicate.
    for (reported, refused) in [
        (
            json!([
                {"status": "StorageDegraded", "reason": "X", "accessMode": "ReadWriteOnce"},
                {"status": "StorageDegraded", "reason": "X", "accessMode": "ReadWriteMany"},
                {"status": "Inaccessible", "reason": "Y"}]),
            vec![
                "status.storageHealth[0].healthConditions[1]",
                "status.storageHealth[0].healthConditions[2].status",
            ],
        ),
        (
            json!([
                {"status": "StorageDegraded", "reason": "X", "accessMode": "ReadWriteOnce"},
                {"status": "StorageDegraded", "reason": "X", "accessMode": "ReadWriteOnce"}]),
            vec!["status.storageHealth[0].healthConditions[1]"],
        ),
    ] {
        let r = driver_conditions(&api, reported).await;
        assert_eq!(causes(&r.json), refused, "{}", r.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_tokens_are_scoped_to_their_node() {
    let (_dir, server, anon) = start_server_with_tokens(
        "admin-token,admin,1,\"system:masters\"\nnode-a-token,system:node:node-a,2,\"system:nodes\"\nmonitor-token,system:serviceaccount:kube-system:monitor,3\n",
        &[],
    );
    let kc = std::fs::read_to_string(&server.kubeconfig).unwrap();
    assert!(
        kc.contains("admin-token"),
        "kubeconfig carries the first token: {kc}"
    );
    assert_eq!(anon.get(PVCS).await.code, 401);
    assert_eq!(anon.with_token("wrong").get(PVCS).await.code, 401);
    let admin = anon.with_token("admin-token");
    let node = anon.with_token("node-a-token");
    let monitor = anon.with_token("monitor-token");
    admin.post(PVCS, &pvc("d")).await;
    admin.create(PODS, &pod("on-a", "node-a", "d")).await;
    admin.create(PODS, &pod("on-b", "node-b", "d")).await;
    admin
        .create(CSINODES, &csinode("node-b", "d.example.com"))
        .await;

    let vh = json!({"status": {"volumeHealth": [{"name": "data", "healthConditions": conditions("Inaccessible", "NoPath")}]}});
    let own = node
        .patch(&format!("{PODS}/on-a/status"), STRATEGIC, &vh)
        .await;
    assert_eq!(own.code, 200, "{}", own.text);
    let other = node
        .patch(&format!("{PODS}/on-b/status"), STRATEGIC, &vh)
        .await;
    assert_eq!(other.code_and_reason(), (403, Some("Forbidden")));
    let msg = other.message();
    assert!(msg.starts_with("pods \"on-b\" is forbidden: User \"system:node:node-a\" cannot patch resource \"pods/status\""), "{msg}");
    assert!(msg.contains("node \"node-a\" can only"), "{msg}");

    // Its own CSINode: create and patch status; another node's: no.
    node.create(CSINODES, &csinode("node-a", "d.example.com"))
        .await;
    let sh = json!({"status": {"storageHealth": [{"name": "d.example.com", "healthConditions": conditions("StorageUnreachable", "NoRoute")}]}});
    assert_eq!(
        node.patch(&format!("{CSINODES}/node-a/status"), MERGE, &sh)
            .await
            .code,
        200
    );
    assert_eq!(
        node.patch(&format!("{CSINODES}/node-b/status"), MERGE, &sh)
            .await
            .code,
        403
    );
    assert_eq!(
        node.post(CSINODES, &csinode("node-c", "d.example.com"))
            .await
            .code,
        403
    );

    // Nodes read what a kubelet reads (the Node authorizer lets a kubelet get the claims of its
    // own pods one by name, and list none), and never write PVC status.
    assert_eq!(node.get(PVCS).await.code, 403);
    assert_eq!(
        node.get(&format!("{PODS}?fieldSelector=spec.nodeName%3Dnode-a"))
            .await
            .code,
        200
    );
    let hs =
        json!({"status": {"healthStatus": {"healthConditions": conditions("Degraded", "Slow")}}});
    assert_eq!(
        node.patch(&format!("{PVCS}/d/status"), MERGE, &hs)
            .await
            .code,
        403
    );
    node.create("/api/v1/namespaces/default/events", &json!({"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "on-a", "namespace": "default"}, "reason": "VolumeUnhealthy", "message": "m", "type": "Warning"})).await;
    assert_eq!(node.delete(&format!("{PODS}/on-b")).await.code, 403);
    assert_eq!(
        monitor
            .patch(&format!("{PVCS}/d/status"), MERGE, &hs)
            .await
            .code,
        200
    );
    // Health and readiness stay open.
    assert_eq!(anon.get("/readyz").await.code, 200);
}
