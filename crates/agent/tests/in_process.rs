//! The agent in this process, against the embedded API server and the reference driver over real
//! HTTP and a real unix socket, with a node identity and the kubelet's directories played by
//! hand: a volume fault reaches the pod's status, a storage fault the CSINode's, each with a
//! Warning Event on its object; recovery clears both; `run` returns once its shutdown future
//! completes. Several pods failing at once all reach their status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use serde_json::json;
use std::time::Duration;
use volhealth_agent::KubeletRoot;
use volhealth_driver::condition::{storage_status, volume_status};
use volhealth_driver::injection::Side;
use volhealth_testkit::{
    NodeWorld, Service, bind_claim, create, pod_volume_conditions, run_agent, stage_and_publish,
    storage_conditions, wait_for,
};
use volhealth_writer::events::{REASON_STORAGE_DEGRADED, REASON_VOLUME_DEGRADED};

const DRIVER: &str = "hostpath.volhealth.io";
const NODE: &str = "node-a";
const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
    nodetok,system:node:node-a,2,\"system:nodes\"\n";
const WAIT: Duration = Duration::from_secs(40);

async fn pod_conditions(pods: &Api<Pod>, pod: &str) -> Vec<(String, String, String)> {
    pod_volume_conditions(pods, pod).await
}

async fn has_event(client: &kube::Client, ns: Option<&str>, name: &str, reason: &str) -> bool {
    let events: Api<Event> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("list events")
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some(reason))
}

/// The agent for the world's node, as that node, probing every second.
fn start_agent(w: &NodeWorld) -> Service {
    let config = w.agent_config("nodetok", None);
    run_agent("agent", config)
}

/// Another pod `name` on the node with one volume `data` of a new claim, staged and published as
/// the kubelet does; returns the volume's id.
async fn another_pod(w: &NodeWorld, name: &str) -> String {
    let pv = format!("pv-{name}");
    let volume = w.driver.create_volume(&pv).await;
    let claim = format!("claim-{name}");
    bind_claim(&w.admin, DRIVER, &claim, &pv, &volume).await;
    let pod: Pod = create(
        &Api::<Pod>::namespaced(w.admin.clone(), "default"),
        json!({"metadata": {"name": name, "namespace": "default"},
               "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "busybox"}],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}),
    )
    .await;
    let uid = pod.metadata.uid.expect("the pod's uid");
    let (stage, publish) = KubeletRoot::volume_dirs(&w.root, DRIVER, &volume, &uid, &pv);
    stage_and_publish(&w.driver, &volume, &pv, &stage, &publish).await;
    volume
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_and_storage_faults_reach_pod_and_csinode_and_clear() {
    let w = NodeWorld::start(DRIVER, NODE, TOKENS, None, KubeletRoot::volume_dirs).await;
    let (driver, admin, volume) = (&w.driver, w.admin.clone(), w.volume.clone());
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let agent = start_agent(&w);

    driver.inject_volume(&volume, Side::Node, volume_status::INACCESSIBLE, "PathGone");
    let want = vec![(
        "data".to_string(),
        "Inaccessible".to_string(),
        "PathGone".to_string(),
    )];
    wait_for(WAIT, "the volume fault on the pod's status", || async {
        (pod_conditions(&pods, "web").await == want).then_some(())
    })
    .await;
    wait_for(WAIT, "a Warning Event on the pod", || async {
        has_event(&admin, Some("default"), "web", REASON_VOLUME_DEGRADED)
            .await
            .then_some(())
    })
    .await;

    driver.inject_storage(NODE, storage_status::STORAGE_UNREACHABLE, "Partition");
    let want = vec![("StorageUnreachable".to_string(), "Partition".to_string())];
    wait_for(
        WAIT,
        "the storage fault on the CSINode's status",
        || async { (storage_conditions(&admin, NODE, DRIVER).await == want).then_some(()) },
    )
    .await;
    wait_for(WAIT, "a Warning Event on the CSINode", || async {
        has_event(&admin, None, NODE, REASON_STORAGE_DEGRADED)
            .await
            .then_some(())
    })
    .await;
    assert!(
        !agent.ended(),
        "the agent keeps running while nothing asks it to stop"
    );

    driver.clear_volume(&volume);
    driver.clear_storage();
    wait_for(WAIT, "both faults to clear", || async {
        (pod_conditions(&pods, "web").await.is_empty()
            && storage_conditions(&admin, NODE, DRIVER).await.is_empty())
        .then_some(())
    })
    .await;

    agent
        .stop()
        .expect("the agent returns Ok once its shutdown future completes");
    w.driver.stop().expect("the driver stops cleanly");
    w.api.stop().expect("the API server stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_pods_failing_at_once_all_reach_their_status() {
    let w = NodeWorld::start(DRIVER, NODE, TOKENS, None, KubeletRoot::volume_dirs).await;
    let mut volumes = vec![("web".to_string(), w.volume.clone())];
    for name in ["db", "cache", "queue"] {
        volumes.push((name.to_string(), another_pod(&w, name).await));
    }
    let agent = start_agent(&w);
    let faults = [
        (volume_status::DEGRADED, "Degraded"),
        (volume_status::INACCESSIBLE, "Inaccessible"),
        (volume_status::DATA_LOSS, "DataLoss"),
        (volume_status::INACCESSIBLE, "Inaccessible"),
    ];
    for ((_, volume), (status, _)) in volumes.iter().zip(faults) {
        w.driver
            .inject_volume(volume, Side::Node, status, "Correlated");
    }
    let pods: Api<Pod> = Api::namespaced(w.admin.clone(), "default");
    wait_for(WAIT, "every pod's fault on its status", || async {
        for ((pod, _), (_, want)) in volumes.iter().zip(faults) {
            let want = vec![(
                "data".to_string(),
                want.to_string(),
                "Correlated".to_string(),
            )];
            if pod_conditions(&pods, pod).await != want {
                return None;
            }
        }
        Some(())
    })
    .await;
    for (_, volume) in &volumes {
        w.driver.clear_volume(volume);
    }
    wait_for(WAIT, "every pod's fault to clear", || async {
        for (pod, _) in &volumes {
            if !pod_conditions(&pods, pod).await.is_empty() {
                return None;
            }
        }
        Some(())
    })
    .await;
    agent.stop().expect("the agent stops cleanly");
    w.driver.stop().expect("the driver stops cleanly");
    w.api.stop().expect("the API server stops cleanly");
}
