//! The extender against the real embedded API server over HTTP: informer-fed answers to
//! `POST /filter` in kube-scheduler's encoding, both KEP examples as annotation values, the
//! condition's accessMode / volumeMode scoping, and an invalid policy that filters nothing but
//! leaves an Event on the CSIDriver and a metric.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tokio::net::TcpListener;
use volhealth_testkit::{start_apiserver, wait_event, wait_until};

/// How long a test waits for the extender.
const WAIT: Duration = Duration::from_secs(10);

const TOPOLVM: &str = "topolvm.io";
const CEPH: &str = "rbd.csi.ceph.com";
/// The KEP's first example, as JSON (the second is YAML: both encodings are read).
const EXAMPLE_1: &str = r#"{"rules": [{"status": "StorageUnreachable"}]}"#;
const EXAMPLE_2: &str = "rules:\n  - status: StorageUnreachable\n  - status: StorageDegraded\n    accessModes: [ReadWriteOnce]\n";

async fn client(kubeconfig: &Path) -> kube::Client {
    volhealth_kube_access::client::load(Some(kubeconfig))
        .await
        .unwrap()
        .client
}

async fn create<K>(api: Api<K>, v: Value)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    let obj: K = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn driver(client: &kube::Client, name: &str, policy: &str) {
    create::<CSIDriver>(
        Api::all(client.clone()),
        json!({"metadata": {"name": name, "annotations": {volhealth_scheduler::ANNOTATION: policy}}, "spec": {}}),
    )
    .await;
}

/// A PV of `driver` with these modes, bound to claim `default/NAME`.
async fn claim(client: &kube::Client, name: &str, driver: &str, modes: &[&str], volume_mode: &str) {
    let pv = format!("pv-{name}");
    create::<PersistentVolume>(Api::all(client.clone()), json!({
        "metadata": {"name": pv},
        "spec": {"accessModes": modes, "volumeMode": volume_mode, "capacity": {"storage": "1Gi"},
                 "csi": {"driver": driver, "volumeHandle": format!("vh-{name}")},
                 "claimRef": {"namespace": "default", "name": name}}
    }))
    .await;
    create::<PersistentVolumeClaim>(
        Api::namespaced(client.clone(), "default"),
        json!({
            "metadata": {"name": name},
            "spec": {"accessModes": modes, "volumeMode": volume_mode, "volumeName": pv,
                     "resources": {"requests": {"storage": "1Gi"}}}
        }),
    )
    .await;
}

/// A CSINode for `node` registering both drivers, with `conditions` for `driver`.
async fn csinode(client: &kube::Client, node: &str, driver: &str, conditions: Value) {
    create::<CSINode>(
        Api::all(client.clone()),
        json!({
            "metadata": {"name": node},
            "spec": {"drivers": [{"name": TOPOLVM, "nodeID": node}, {"name": CEPH, "nodeID": node}]}
        }),
    )
    .await;
    if conditions.as_array().is_some_and(|c| !c.is_empty()) {
        let api: Api<CSINode> = Api::all(client.clone());
        let patch = json!({"status": {"storageHealth": [{"name": driver, "healthConditions": conditions}]}});
        api.patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
}

fn cond(status: &str, reason: &str, access_mode: Option<&str>, volume_mode: Option<&str>) -> Value {
    let mut c =
        json!({"status": status, "reason": reason, "lastTransitionTime": "2026-01-01T00:00:00Z"});
    if let Some(m) = access_mode {
        c["accessMode"] = json!(m);
    }
    if let Some(m) = volume_mode {
        c["volumeMode"] = json!(m);
    }
    c
}

fn pod(claims: &[&str]) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": format!("v-{c}"), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    json!({"metadata": {"name": "db-0", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": volumes}})
}

const NODES: [&str; 6] = [
    "ok",
    "unreachable",
    "degraded",
    "rwx-only",
    "block-only",
    "ceph-down",
];

struct Extender {
    url: String,
    http: reqwest::Client,
}

impl Extender {
    async fn filter(&self, body: Value) -> Value {
        let r = self
            .http
            .post(format!("{}/filter", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    /// The nodes the extender rejects for a pod with `claims`, asking by name.
    async fn rejected(&self, claims: &[&str]) -> Vec<String> {
        let v = self
            .filter(json!({"Pod": pod(claims), "Nodes": null, "NodeNames": NODES}))
            .await;
        assert_eq!(v["Error"], "", "{v}");
        assert_eq!(v["FailedNodes"], json!({}), "{v}");
        let failed = v["FailedAndUnresolvableNodes"].as_object().unwrap();
        let passed: Vec<&str> = v["NodeNames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert_eq!(passed.len() + failed.len(), NODES.len(), "{v}");
        let mut out: Vec<String> = failed.keys().cloned().collect();
        out.sort();
        out
    }

    async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extender_filters_as_the_keps_rules_say() {
    let dir = tempfile::tempdir().unwrap();
    let api = start_apiserver(dir.path(), &[]);
    let kubeconfig = api.kubeconfig.clone();
    let kc = client(&kubeconfig).await;
    driver(&kc, TOPOLVM, EXAMPLE_2).await;
    driver(&kc, CEPH, EXAMPLE_1).await;
    claim(&kc, "rwo-fs", TOPOLVM, &["ReadWriteOnce"], "Filesystem").await;
    claim(&kc, "rwx-fs", TOPOLVM, &["ReadWriteMany"], "Filesystem").await;
    claim(&kc, "rwo-block", TOPOLVM, &["ReadWriteOnce"], "Block").await;
    claim(&kc, "ceph", CEPH, &["ReadWriteOnce"], "Block").await;
    csinode(&kc, "ok", TOPOLVM, json!([])).await;
    let unhealthy = [
        (
            "unreachable",
            TOPOLVM,
            cond("StorageUnreachable", "NetworkPartition", None, None),
        ),
        (
            "degraded",
            TOPOLVM,
            cond("StorageDegraded", "PhysicalVolumeMissing", None, None),
        ),
        (
            "rwx-only",
            TOPOLVM,
            cond("StorageUnreachable", "NfsDown", Some("ReadWriteMany"), None),
        ),
        (
            "block-only",
            TOPOLVM,
            cond("StorageUnreachable", "BlockPath", None, Some("Block")),
        ),
        (
            "ceph-down",
            CEPH,
            cond("StorageUnreachable", "MonitorsUnreachable", None, None),
        ),
    ];
    for (node, driver, condition) in unhealthy {
        csinode(&kc, node, driver, json!([condition])).await;
    }

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let config = volhealth_scheduler::ExtenderConfig {
        kubeconfig: Some(kubeconfig.clone()),
    };
    tokio::spawn(volhealth_scheduler::run(
        config,
        listener,
        std::future::pending(),
    ));
    let ext = Extender {
        url,
        http: reqwest::Client::new(),
    };
    wait_until(WAIT, "the extender to be ready", || async {
        matches!(ext.http.get(format!("{}/readyz", ext.url)).send().await, Ok(r) if r.status() == 200)
    })
    .await;

    // Example 2: unreachable blocks every claim; degraded only ReadWriteOnce claims.
    // The condition's own scoping: rwx-only affects only RWX claims, block-only only Block ones.
    assert_eq!(ext.rejected(&["rwo-fs"]).await, ["degraded", "unreachable"]);
    assert_eq!(ext.rejected(&["rwx-fs"]).await, ["rwx-only", "unreachable"]);
    assert_eq!(
        ext.rejected(&["rwo-block"]).await,
        ["block-only", "degraded", "unreachable"]
    );
    // Example 1 for the other driver: its own nodes only.
    assert_eq!(ext.rejected(&["ceph"]).await, ["ceph-down"]);
    assert_eq!(
        ext.rejected(&["ceph", "rwx-fs"]).await,
        ["ceph-down", "rwx-only", "unreachable"]
    );
    // A pod without claims, or with an unknown claim, passes everywhere.
    assert!(ext.rejected(&[]).await.is_empty());
    assert!(ext.rejected(&["missing"]).await.is_empty());

    // Full node objects in, filtered node objects out; the reason names driver, status, reason.
    let items: Vec<Value> = NODES
        .iter()
        .map(|n| json!({"metadata": {"name": n, "labels": {"x": n}}}))
        .collect();
    let v = ext
        .filter(json!({"Pod": pod(&["ceph"]), "Nodes": {"metadata": {}, "items": items}, "NodeNames": null}))
        .await;
    let passed = v["Nodes"]["items"].as_array().unwrap();
    assert_eq!(passed.len(), 5, "{v}");
    assert!(passed.iter().all(|n| n["metadata"]["name"] != "ceph-down"
        && n["metadata"]["labels"]["x"] == n["metadata"]["name"]));
    let why = v["FailedAndUnresolvableNodes"]["ceph-down"]
        .as_str()
        .unwrap();
    for part in [
        CEPH,
        "StorageUnreachable",
        "MonitorsUnreachable",
        "default/ceph",
    ] {
        assert!(why.contains(part), "{why}");
    }

    // A condition that clears lets the node back in, through the watch.
    let api: Api<CSINode> = Api::all(kc.clone());
    api.patch_status(
        "degraded",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"storageHealth": null}})),
    )
    .await
    .unwrap();
    wait_until(WAIT, "the cleared node to pass", || async {
        ext.rejected(&["rwo-fs"]).await == ["unreachable"]
    })
    .await;

    let page = ext.metrics().await;
    assert!(
        page.contains("volhealth_scheduler_filter_requests_total{result=\"success\"}"),
        "{page}"
    );
    assert!(page.contains("volhealth_scheduler_nodes_rejected_total{driver_name=\"rbd.csi.ceph.com\",status=\"StorageUnreachable\"}"), "{page}");
    assert!(
        page.contains("volhealth_scheduler_filter_duration_seconds_count"),
        "{page}"
    );

    // An invalid policy filters nothing, and says so on the CSIDriver and in a metric.
    let drivers: Api<CSIDriver> = Api::all(kc.clone());
    let bad = json!({"metadata": {"annotations": {volhealth_scheduler::ANNOTATION: "rules: [{status: Unreachable}]"}}});
    drivers
        .patch(TOPOLVM, &PatchParams::default(), &Patch::Merge(&bad))
        .await
        .unwrap();
    wait_until(WAIT, "the invalid policy to be ignored", || async {
        ext.rejected(&["rwo-fs"]).await.is_empty()
    })
    .await;
    assert_eq!(
        ext.rejected(&["ceph"]).await,
        ["ceph-down"],
        "other drivers keep their policy"
    );
    let page = ext.metrics().await;
    assert!(
        page.contains("volhealth_scheduler_policy_invalid{driver_name=\"topolvm.io\"} 1"),
        "{page}"
    );
    wait_event(&kc, WAIT, "the invalid-policy Event", |e| {
        e.reason.as_deref() == Some("InvalidHealthSchedulingPolicy")
            && e.involved_object.kind.as_deref() == Some("CSIDriver")
            && e.involved_object.name.as_deref() == Some(TOPOLVM)
            && e.message
                .as_deref()
                .is_some_and(|m| m.contains("rules[0].status"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_request_is_a_400_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let api = start_apiserver(dir.path(), &[]);
    let kubeconfig = api.kubeconfig.clone();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let config = volhealth_scheduler::ExtenderConfig {
        kubeconfig: Some(kubeconfig),
    };
    tokio::spawn(volhealth_scheduler::run(
        config,
        listener,
        std::future::pending(),
    ));
    let http = reqwest::Client::new();
    let mut answer = None;
    for _ in 0..500 {
        if let Ok(r) = http
            .post(format!("{url}/filter"))
            .body("{\"NodeNames\": []}")
            .send()
            .await
        {
            answer = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = answer.expect("the extender answers");
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert!(v["Error"].as_str().unwrap().contains("no Pod"), "{v}");
}
