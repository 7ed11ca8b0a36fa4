//! kubectl against the API server: get (with the HEALTH column), -o yaml, describe with
//! events, create/apply/server-side apply, status patches, get -w, wait and delete. Skipped when
//! kubectl is missing (fails under VOLHEALTH_REQUIRE_TOOLS=1).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::json;
use std::io::BufRead;
use std::process::Stdio;
use std::time::Duration;
use support::kubectl::Kubectl;

fn setup() -> Option<(tempfile::TempDir, support::ApiServer, Api, Kubectl)> {
    let (dir, server, k) = Kubectl::start(&[])?;
    let api = Api::new(&server.url);
    Some((dir, server, api, k))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_yaml_and_describe_show_health() {
    let Some((_d, _s, api, k)) = setup() else {
        return;
    };
    let created = api.post(PVCS, &pvc("data-1")).await.json;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    api.patch(&format!("{PVCS}/data-1/status"), MERGE, &json!({"status": {"phase": "Bound", "healthStatus": {"healthConditions": conditions("Inaccessible", "VolumeNotFound")}}})).await;
    api.post("/api/v1/namespaces/default/events", &json!({
        "metadata": {"name": "data-1.unhealthy"},
        "involvedObject": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data-1", "uid": uid, "apiVersion": "v1"},
        "reason": "VolumeUnhealthy", "message": "volume not found on the backend", "type": "Warning", "count": 1,
        "source": {"component": "volhealth-monitor"}})).await;
    api.post(PODS, &pod("app", "node-a", "data-1")).await;

    let table = k.ok(&["get", "pvc"]);
    let header = table.lines().next().unwrap();
    assert!(header.contains("HEALTH"), "{table}");
    assert!(table.contains("Inaccessible/VolumeNotFound"), "{table}");
    let wide = k.ok(&["get", "pvc", "-A", "-o", "wide"]);
    assert!(
        wide.contains("VOLUMEMODE") && wide.contains("default"),
        "{wide}"
    );
    let yaml = k.ok(&["get", "pvc", "data-1", "-o", "yaml"]);
    assert!(
        yaml.contains("healthStatus:") && yaml.contains("reason: VolumeNotFound"),
        "{yaml}"
    );
    let jp = k.ok(&[
        "get",
        "pvc",
        "data-1",
        "-o",
        "jsonpath={.status.healthStatus.healthConditions[*].status}",
    ]);
    assert_eq!(jp, "Inaccessible");
    let described = k.ok(&["describe", "pvc", "data-1"]);
    assert!(
        described.contains("VolumeUnhealthy")
            && described.contains("volume not found on the backend"),
        "{described}"
    );
    assert!(
        described.contains("Used By:") && described.contains("app"),
        "{described}"
    );
    let all = k.ok(&["get", "all"]);
    assert!(
        all.lines().any(|l| l
            .split_whitespace()
            .next()
            .is_some_and(|n| n.ends_with("app"))),
        "{all}"
    );
    let labelled = k.ok(&[
        "get",
        "pods",
        "--field-selector",
        "spec.nodeName=node-a",
        "-o",
        "name",
    ]);
    assert_eq!(labelled.trim(), "pod/app");
    let events = k.ok(&["events", "-n", "default"]);
    assert!(events.contains("VolumeUnhealthy"), "{events}");
    api.post(CSINODES, &csinode("node-a", "d.example.com"))
        .await;
    api.patch(&format!("{CSINODES}/node-a/status"), MERGE, &json!({"status": {"storageHealth": [
        {"name": "d.example.com", "healthConditions": conditions("StorageUnreachable", "NoRoute")}]}})).await;
    api.patch(
        &format!("{PODS}/app/status"),
        MERGE,
        &json!({"status": {"volumeHealth": [
        {"name": "data", "healthConditions": conditions("DataLoss", "Corrupt")}]}}),
    )
    .await;
    let nodes = k.ok(&["get", "csinode"]);
    assert!(
        nodes.contains("HEALTH") && nodes.contains("d.example.com:StorageUnreachable/NoRoute"),
        "{nodes}"
    );
    let pods = k.ok(&["get", "pods"]);
    assert!(pods.contains("data:DataLoss/Corrupt"), "{pods}");
    let metrics = k.ok(&["get", "--raw", "/metrics"]);
    assert!(metrics.contains("apiserver_request_total"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_apply_patch_and_delete() {
    let Some((dir, _s, api, k)) = setup() else {
        return;
    };
    let file = dir.path().join("pvc.yaml");
    let write = |labels: &str| {
        std::fs::write(&file, format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data-2\n  labels:\n{labels}spec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n")).unwrap();
    };
    write("    a: one\n");
    let f = file.to_str().unwrap();
    assert!(k.ok(&["create", "-f", f]).contains("created"));
    assert!(
        !k.run(&["create", "-f", f]).status.success(),
        "second create is AlreadyExists"
    );
    k.ok(&["delete", "pvc", "data-2"]);
    assert!(k.ok(&["apply", "-f", f]).contains("created"));
    write("    b: two\n");
    assert!(k.ok(&["apply", "-f", f]).contains("configured"));
    let labels = api.get(&format!("{PVCS}/data-2")).await.json["metadata"]["labels"].clone();
    assert_eq!(
        labels,
        json!({"b": "two"}),
        "client-side apply removed the dropped label"
    );
    write("    c: three\n");
    k.ok(&["apply", "--server-side", "-f", f]);
    assert_eq!(
        api.get(&format!("{PVCS}/data-2")).await.json["metadata"]["labels"]["c"],
        "three"
    );

    // `kubectl patch pvc data-2 --subresource=status [TYPE] -p PATCH`.
    let status_patch = |ty: &[&'static str], patch: &'static str| {
        let command: &[&str] = &["patch", "pvc", "data-2", "--subresource=status"];
        [command, ty, &["-p", patch]].concat()
    };
    let merge = r#"{"status":{"healthStatus":{"healthConditions":[{"status":"Degraded","reason":"Slow"}]}}}"#;
    k.ok(&status_patch(&["--type=merge"], merge));
    let strategic = r#"{"status":{"healthStatus":{"healthConditions":[{"status":"DataLoss","reason":"Corrupt"}]}}}"#;
    k.ok(&status_patch(&[], strategic));
    let got = api.get(&format!("{PVCS}/data-2")).await.json;
    assert_eq!(
        got["status"]["healthStatus"]["healthConditions"],
        json!([{"status": "DataLoss", "reason": "Corrupt"}])
    );
    let jsonp = r#"[{"op":"replace","path":"/status/healthStatus/healthConditions/0/reason","value":"Gone"}]"#;
    k.ok(&status_patch(&["--type=json"], jsonp));
    let nope =
        r#"{"status":{"healthStatus":{"healthConditions":[{"status":"Nope","reason":"X"}]}}}"#;
    let bad = k.run(&status_patch(&["--type=merge"], nope));
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("status.healthStatus.healthConditions[0].status")
    );

    assert!(k.ok(&["delete", "pvc", "data-2"]).contains("deleted"));
    let gone = k.run(&["get", "pvc", "data-2"]);
    assert!(String::from_utf8_lossy(&gone.stderr).contains("NotFound"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_and_wait_follow_patches() {
    let Some((_d, _s, api, k)) = setup() else {
        return;
    };
    api.post(PVCS, &pvc("data-3")).await;
    let mut watch = k
        .command(&["get", "pvc", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut wait = k
        .command(&[
            "wait",
            "pvc/data-3",
            "--for=jsonpath={.status.healthStatus.healthConditions[0].reason}=Slow",
            "--timeout=60s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The initial row shows first; then patch and expect the updated row.
    support::wait_for(Duration::from_secs(30), "the initial watch row", || {
        rx.try_recv().ok().filter(|l| l.contains("data-3"))
    });
    api.patch(
        &format!("{PVCS}/data-3/status"),
        MERGE,
        &json!({"status": {"healthStatus": {"healthConditions": conditions("Degraded", "Slow")}}}),
    )
    .await;
    support::wait_for(Duration::from_secs(30), "the patched watch row", || {
        rx.try_recv().ok().filter(|l| l.contains("Degraded/Slow"))
    });
    let status = support::wait_for(Duration::from_secs(60), "kubectl wait", || {
        wait.try_wait().ok().flatten()
    });
    assert!(status.success());
    let _ = watch.kill();
    let _ = watch.wait();
}

/// The node agent's Events, created and patched with a node's token, are what `kubectl describe
/// pod` and `kubectl describe csinode` list: kubectl finds them by involvedObject kind, name,
/// namespace (empty for the cluster-scoped CSINode, whose Event lives in `default`) and uid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_lists_node_events_for_pods_and_csinodes() {
    if !support::kubectl::available() {
        return;
    }
    // kubectl sends no token over plain HTTP: it is the anonymous administrator.
    let (dir, server, anonymous) = start_server_with_tokens(
        "admin-token,admin,1,\"system:masters\"\nnode-a-token,system:node:node-a,2,\"system:nodes\"\n",
        &["--anonymous-admin"],
    );
    let k = Kubectl::new(&server, dir.path());
    let admin = anonymous.with_token("admin-token");
    let node = admin.with_token("node-a-token");
    admin.post(PVCS, &pvc("data-1")).await;
    let pod_uid = admin.post(PODS, &pod("app", "node-a", "data-1")).await.json["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let csinode_uid = admin
        .post(CSINODES, &csinode("node-a", "d.example.com"))
        .await
        .json["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let event = |name: &str, involved: serde_json::Value, reason: &str, message: &str| {
        json!({"metadata": {"name": name}, "involvedObject": involved, "reason": reason,
            "message": message, "type": "Warning", "count": 1,
            "source": {"component": "volhealth-agent", "host": "node-a"}})
    };
    const EVENTS: &str = "/api/v1/namespaces/default/events";
    let r = node
        .post(
            EVENTS,
            &event(
                "app.volume",
                json!({"kind": "Pod", "apiVersion": "v1", "namespace": "default", "name": "app", "uid": pod_uid}),
                "VolumeUnhealthy",
                "volume data: first report",
            ),
        )
        .await;
    assert_eq!(r.code, 201, "a node may create Events: {}", r.text);
    let r = node
        .patch(
            &format!("{EVENTS}/app.volume"),
            STRATEGIC,
            &json!({"count": 2, "message": "volume data: Inaccessible/VolumeNotFound"}),
        )
        .await;
    assert_eq!(r.code, 200, "a node may patch Events: {}", r.text);
    node
        .create(
            EVENTS,
            &event(
                "node-a.storage",
                json!({"kind": "CSINode", "apiVersion": "storage.k8s.io/v1", "name": "node-a", "uid": csinode_uid}),
                "StorageUnhealthy",
                "backend of d.example.com unreachable",
            ),
        )
        .await;
    // Decoys that share the name but not the kind or the uid.
    for (name, involved) in [
        (
            "node-a.node",
            json!({"kind": "Node", "apiVersion": "v1", "name": "node-a", "uid": "node-uid"}),
        ),
        (
            "node-a.old",
            json!({"kind": "CSINode", "apiVersion": "storage.k8s.io/v1", "name": "node-a", "uid": "an-older-csinode"}),
        ),
    ] {
        node.create(
            EVENTS,
            &event(name, involved, "Decoy", &format!("decoy {name}")),
        )
        .await;
    }
    let r = node.delete(&format!("{EVENTS}/app.volume")).await;
    assert_eq!(r.code, 403, "nodes may not delete Events: {}", r.text);

    // The selector kubectl sends for a CSINode, across namespaces, with an empty namespace.
    let sel = format!(
        "/api/v1/events?fieldSelector=involvedObject.name%3Dnode-a,involvedObject.namespace%3D,involvedObject.kind%3DCSINode,involvedObject.uid%3D{csinode_uid}"
    );
    let listed = admin.get(&sel).await;
    assert_eq!(listed.code, 200, "{}", listed.text);
    let names = item_names(&listed.json);
    assert_eq!(names, ["node-a.storage"]);

    let described = k.ok(&["describe", "pod", "app"]);
    assert!(
        described.contains("VolumeUnhealthy")
            && described.contains("volume data: Inaccessible/VolumeNotFound"),
        "{described}"
    );
    let described = k.ok(&["describe", "csinode", "node-a"]);
    assert!(
        described.contains("StorageUnhealthy")
            && described.contains("backend of d.example.com unreachable"),
        "{described}"
    );
    assert!(!described.contains("decoy"), "{described}");
}
