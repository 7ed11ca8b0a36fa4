//! The `pods/eviction` subresource and PodDisruptionBudgets through kube-rs: a budget that
//! allows no disruption refuses with 429, one that allows it lets the pod go, and the budget's
//! status says why.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

async fn client(server: &support::ApiServer) -> kube::Client {
    let kc = Kubeconfig::read_from(&server.kubeconfig).expect("read kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    // kube retries a 429 with backoff by default; the test wants to see it.
    config.default_retry = false;
    kube::Client::try_from(config).expect("kube client")
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "db"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_budget_blocks_an_eviction_until_it_allows_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    let client = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    for name in ["db-0", "db-1"] {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .unwrap();
        let ready = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&ready))
            .await
            .unwrap();
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();

    let err = pods
        .evict("db-0", &EvictParams::default())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("not an API error: {err}")
    };
    assert_eq!(status.code, 429, "{status:?}");
    assert!(status.message.contains("disruption budget"), "{status:?}");
    assert!(pods.get_opt("db-0").await.unwrap().is_some(), "not evicted");
    let s = pdbs.get("db").await.unwrap().status.unwrap();
    assert_eq!(
        (s.expected_pods, s.current_healthy, s.disruptions_allowed),
        (Some(2), Some(2), Some(0))
    );

    // A pod no budget selects goes at once.
    let mut other = pod("web-0");
    other.metadata.labels = None;
    pods.create(&PostParams::default(), &other).await.unwrap();
    pods.evict("web-0", &EvictParams::default()).await.unwrap();
    assert!(pods.get_opt("web-0").await.unwrap().is_none());

    // One disruption allowed: the first eviction passes, the second is refused.
    let mut relaxed = pdbs.get("db").await.unwrap();
    relaxed.spec.as_mut().unwrap().min_available =
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1));
    pdbs.replace("db", &PostParams::default(), &relaxed)
        .await
        .unwrap();
    pods.evict("db-0", &EvictParams::default()).await.unwrap();
    assert!(pods.get_opt("db-0").await.unwrap().is_none(), "evicted");
    let err = pods
        .evict("db-1", &EvictParams::default())
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 429));
    // Evicting a pod that does not exist is a 404.
    let err = pods
        .evict("gone", &EvictParams::default())
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 404));
}
