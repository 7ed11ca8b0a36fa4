//! The agent in this process, against the embedded API server and the reference driver over real
//! HTTP and a real unix socket, with a node identity and the kubelet's directories played by
//! hand: a volume fault reaches the pod's status, a storage fault the CSINode's, each with a
//! Warning Event on its object; recovery clears both; `run` returns once its shutdown future
//! completes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, ListParams};
use std::time::Duration;
use volhealth_agent::{AgentConfig, KubeletRoot, StaticDriver};
use volhealth_driver::condition::{storage_status, volume_status};
use volhealth_driver::injection::Side;
use volhealth_testkit::{NodeWorld, Service, wait_for};
use volhealth_writer::events::{REASON_STORAGE_DEGRADED, REASON_VOLUME_DEGRADED};

const DRIVER: &str = "hostpath.volhealth.io";
const NODE: &str = "node-a";
const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
    nodetok,system:node:node-a,2,\"system:nodes\"\n";
const WAIT: Duration = Duration::from_secs(40);

async fn pod_conditions(pods: &Api<Pod>, pod: &str) -> Vec<(String, String, String)> {
    let p = pods.get(pod).await.expect("get the pod");
    p.status
        .and_then(|s| s.volume_health)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|e| {
            let name = e.name.clone();
            e.health_conditions
                .unwrap_or_default()
                .into_iter()
                .map(move |c| (name.clone(), c.status, c.reason))
        })
        .collect()
}

async fn storage_conditions(csinodes: &Api<CSINode>) -> Vec<(String, String)> {
    let Ok(c) = csinodes.get(NODE).await else {
        return Vec::new();
    };
    c.status
        .and_then(|s| s.storage_health)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.name == DRIVER)
        .flat_map(|e| e.health_conditions.unwrap_or_default())
        .map(|c| (c.status, c.reason))
        .collect()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_and_storage_faults_reach_pod_and_csinode_and_clear() {
    let w = NodeWorld::start(DRIVER, NODE, TOKENS, None, KubeletRoot::volume_dirs).await;
    let (api, driver, admin, volume) = (&w.api, &w.driver, w.admin.clone(), w.volume.clone());
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");

    let mut config = AgentConfig::new(NODE);
    config.kubeconfig = Some(api.token_kubeconfig(w.dir.path(), "node", "nodetok"));
    config.kubelet_root_dir = w.root.clone();
    config.drivers = vec![StaticDriver {
        name: DRIVER.to_string(),
        endpoint: driver.endpoint.clone(),
    }];
    config.interval = Duration::from_secs(1);
    config.timeout = Duration::from_secs(5);
    config.http_endpoint = None;
    let agent = Service::start("agent", move |shutdown| async move {
        volhealth_agent::run(config, shutdown)
            .await
            .map_err(|e| e.to_string())
    });

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

    let csinodes: Api<CSINode> = Api::all(admin.clone());
    driver.inject_storage(NODE, storage_status::STORAGE_UNREACHABLE, "Partition");
    let want = vec![("StorageUnreachable".to_string(), "Partition".to_string())];
    wait_for(
        WAIT,
        "the storage fault on the CSINode's status",
        || async { (storage_conditions(&csinodes).await == want).then_some(()) },
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
            && storage_conditions(&csinodes).await.is_empty())
        .then_some(())
    })
    .await;

    agent
        .stop()
        .expect("the agent returns Ok once its shutdown future completes");
    w.driver.stop().expect("the driver stops cleanly");
    w.api.stop().expect("the API server stops cleanly");
}
