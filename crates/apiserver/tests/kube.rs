//! kube-rs 5 against the API server: typed KEP fields, patch_status with every patch type,
//! 409 on a stale replace_status, and the runtime watcher in both list modes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimStatus, VolumeHealthCondition, VolumeHealthStatus,
};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use std::time::Duration;

fn pvc(name: &str) -> PersistentVolumeClaim {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"]}}),
    )
    .unwrap()
}

fn condition(status: &str, reason: &str) -> VolumeHealthCondition {
    VolumeHealthCondition {
        status: status.into(),
        reason: reason.into(),
        message: Some(format!("{reason} seen")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_health_fields_and_every_patch_type() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    let client = support::client_for(&server.kubeconfig).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    pvcs.create(&PostParams::default(), &pvc("data-1"))
        .await
        .unwrap();

    let merge = json!({"status": {"healthStatus": {"healthConditions": [{"status": "Inaccessible", "reason": "VolumeNotFound"}]}}});
    let p = pvcs
        .patch_status("data-1", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .unwrap();
    let hs = p
        .status
        .and_then(|s| s.health_status)
        .expect("healthStatus round-trips");
    assert_eq!(hs.health_conditions.unwrap()[0].reason, "VolumeNotFound");

    let strategic = json!({"status": {"healthStatus": {"healthConditions": [{"status": "Degraded", "reason": "Slow"}]}}});
    let p = pvcs
        .patch_status(
            "data-1",
            &PatchParams::default(),
            &Patch::Strategic(&strategic),
        )
        .await
        .unwrap();
    let conds = p
        .status
        .unwrap()
        .health_status
        .unwrap()
        .health_conditions
        .unwrap();
    assert_eq!(conds.len(), 1, "the reported list replaces the stored one");
    assert_eq!(conds[0].status, "Degraded");

    let applied = PersistentVolumeClaim {
        metadata: kube::api::ObjectMeta {
            name: Some("data-1".into()),
            ..Default::default()
        },
        status: Some(PersistentVolumeClaimStatus {
            health_status: Some(VolumeHealthStatus {
                health_conditions: Some(vec![condition("DataLoss", "Corrupt")]),
                last_transition_time: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut apply_body = serde_json::to_value(&applied).unwrap();
    apply_body["apiVersion"] = json!("v1");
    apply_body["kind"] = json!("PersistentVolumeClaim");
    let p = pvcs
        .patch_status(
            "data-1",
            &PatchParams::apply("volhealth-test"),
            &Patch::Apply(&apply_body),
        )
        .await
        .unwrap();
    assert_eq!(
        p.status
            .unwrap()
            .health_status
            .unwrap()
            .health_conditions
            .unwrap()[0]
            .reason,
        "Corrupt"
    );

    // Server-side apply creates a missing object.
    let mut created = serde_json::to_value(pvc("data-2")).unwrap();
    created["apiVersion"] = json!("v1");
    created["kind"] = json!("PersistentVolumeClaim");
    pvcs.patch(
        "data-2",
        &PatchParams::apply("volhealth-test"),
        &Patch::Apply(&created),
    )
    .await
    .unwrap();

    // A stale replace_status is a 409.
    let mut stale = pvcs.get_status("data-1").await.unwrap();
    pvcs.patch_status("data-1", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .unwrap();
    stale.status.as_mut().unwrap().phase = Some("Lost".into());
    match pvcs
        .replace_status("data-1", &PostParams::default(), &stale)
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 409),
        other => panic!("expected 409, got {other:?}"),
    }
    let list = pvcs.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    assert!(
        list.metadata
            .resource_version
            .is_some_and(|r| !r.is_empty())
    );

    // CSINode status is typed too.
    let nodes: Api<CSINode> = Api::all(client);
    let n: CSINode = serde_json::from_value(json!({"metadata": {"name": "node-a"}, "spec": {"drivers": [{"name": "d.example.com", "nodeID": "node-a"}]}})).unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
    let sh = json!({"status": {"storageHealth": [{"name": "d.example.com", "healthConditions": [{"status": "StorageUnreachable", "reason": "NoRoute", "accessMode": "ReadWriteMany"}]}]}});
    let got = nodes
        .patch_status("node-a", &PatchParams::default(), &Patch::Strategic(&sh))
        .await
        .unwrap();
    let health = got.status.unwrap().storage_health.unwrap();
    assert_eq!(
        health[0].health_conditions.as_ref().unwrap()[0]
            .access_mode
            .as_deref(),
        Some("ReadWriteMany")
    );
}

async fn watch_requests(url: &str) -> Option<f64> {
    let text = reqwest::get(format!("{url}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let line = text.lines().find(|l| {
        l.starts_with("apiserver_request_total{verb=\"WATCH\",resource=\"persistentvolumeclaims\"")
    })?;
    line.rsplit(' ').next()?.parse().ok()
}

type Events =
    tokio::sync::mpsc::UnboundedReceiver<Result<watcher::Event<PersistentVolumeClaim>, String>>;

async fn next(rx: &mut Events) -> watcher::Event<PersistentVolumeClaim> {
    let ev = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("watcher timed out");
    ev.expect("watcher ended").expect("watcher error")
}

async fn recv(rx: &mut Events) -> Result<watcher::Event<PersistentVolumeClaim>, String> {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("watcher timed out")
        .expect("watcher ended")
}

async fn watcher_sees_patches(config: watcher::Config) {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &["--bookmark-interval-seconds", "1"]);
    let client = support::client_for(&server.kubeconfig).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
    pvcs.create(&PostParams::default(), &pvc("w"))
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stream = watcher(pvcs.clone(), config.timeout(2));
    let pump = tokio::spawn(async move {
        let mut stream = stream.boxed();
        while let Some(ev) = stream.next().await {
            if tx.send(ev.map_err(|e| e.to_string())).is_err() {
                break;
            }
        }
    });
    while !matches!(next(&mut rx).await, watcher::Event::InitDone) {}
    // Watch timeouts are 2 s: wait until the watcher has re-watched from its last version.
    support::wait_for_async(
        Duration::from_secs(30),
        "a second watch request",
        || async { watch_requests(&server.url).await.filter(|n| *n >= 2.0) },
    )
    .await;
    let body = json!({"status": {"healthStatus": {"healthConditions": [{"status": "Degraded", "reason": "Slow"}]}}});
    pvcs.patch_status("w", &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap();
    loop {
        if let watcher::Event::Apply(p) = next(&mut rx).await
            && let Some(hs) = p.status.and_then(|s| s.health_status)
        {
            assert_eq!(hs.health_conditions.unwrap()[0].reason, "Slow");
            break;
        }
    }
    pump.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_watcher_list_watch() {
    watcher_sees_patches(watcher::Config::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_watcher_streaming_list() {
    watcher_sees_patches(watcher::Config::default().streaming_lists()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_watcher_relists_after_410() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &["--retained-changes", "16"]);
    let client = support::client_for(&server.kubeconfig).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    pvcs.create(&PostParams::default(), &pvc("w"))
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // No bookmarks: the watcher's resourceVersion stays at its list while other resources churn.
    let stream = watcher(
        pvcs.clone(),
        watcher::Config::default().disable_bookmarks().timeout(1),
    );
    let pump = tokio::spawn(async move {
        let mut stream = stream.boxed();
        while let Some(ev) = stream.next().await {
            if tx.send(ev.map_err(|e| e.to_string())).is_err() {
                break;
            }
        }
    });
    while !matches!(recv(&mut rx).await, Ok(watcher::Event::InitDone)) {}
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client, "default");
    let lease: k8s_openapi::api::coordination::v1::Lease =
        serde_json::from_value(json!({"metadata": {"name": "churn"}, "spec": {}})).unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    for i in 0..300 {
        let body = json!({"spec": {"holderIdentity": format!("h{i}")}});
        leases
            .patch("churn", &PatchParams::default(), &Patch::Merge(&body))
            .await
            .unwrap();
    }
    // The next re-watch gets the 410 ERROR event; the watcher reports it and lists again.
    let mut saw_expired = false;
    loop {
        match recv(&mut rx).await {
            Err(e) if e.contains("too old resource version") => saw_expired = true,
            Ok(watcher::Event::InitDone) if saw_expired => break,
            _ => {}
        }
    }
    pump.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_drops_what_the_manager_no_longer_applies() {
    use k8s_openapi::api::core::v1::Pod;
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    let pods: Api<Pod> = Api::namespaced(support::client_for(&server.kubeconfig).await, "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n",
        "containers": [{"name": "c", "image": "busybox"}], "volumes": [{"name": "a"}, {"name": "b"}]}})).unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let apply = |vh: serde_json::Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"volumeHealth": vh}});
    let pp = PatchParams::apply("volhealth-agent");
    let both = apply(json!([
        {"name": "a", "healthConditions": [{"status": "Degraded", "reason": "Slow"}]},
        {"name": "b", "healthConditions": [{"status": "Inaccessible", "reason": "NoPath"}]}]));
    let first = pods
        .patch_status("p", &pp, &Patch::Apply(&both))
        .await
        .unwrap();
    assert_eq!(
        first
            .status
            .as_ref()
            .unwrap()
            .volume_health
            .as_ref()
            .unwrap()
            .len(),
        2
    );
    // The same configuration again changes nothing, not even the resourceVersion.
    let again = pods
        .patch_status("p", &pp, &Patch::Apply(&both))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        first.metadata.resource_version
    );
    let only_a = apply(json!([{"name": "a", "healthConditions": []}]));
    let second = pods
        .patch_status("p", &pp, &Patch::Apply(&only_a))
        .await
        .unwrap();
    let vh = second.status.unwrap().volume_health.unwrap();
    assert_eq!(vh.len(), 1, "entry b was dropped: {vh:?}");
    assert_eq!(vh[0].name, "a");
    assert!(
        vh[0]
            .health_conditions
            .as_ref()
            .is_none_or(|c| c.is_empty())
    );
}
