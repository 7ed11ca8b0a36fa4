//! The controller against the real embedded API server over HTTP: a StorageUnreachable held past
//! its `for` taints and cordons the node, the taint comes off when the condition clears, and
//! dry-run changes nothing but says what it would do in an Event; a replica whose Lease is not
//! fresh does nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, Patch, PatchParams, PostParams};
use prometheus_client::registry::Registry;
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use volhealth_remediate::Policy;
use volhealth_remediate::controller::{ControllerConfig, actions_family, run};
use volhealth_testkit::{ApiServer, start_apiserver, wait_event, wait_until};

/// How long a test waits for the controller.
const WAIT: Duration = Duration::from_secs(10);

const POLICY: &str = "\
rules:
- name: backend-unreachable
  match: {object: CSINode, status: StorageUnreachable, reason: \"*\", driver: \"*\"}
  for: 1m
  actions: [{taint: {key: volhealth.io/storage-unreachable, effect: NoSchedule}}, cordon]
";

/// The embedded API server (which lets the test's anonymous client do anything) and a client.
async fn apiserver(dir: &Path) -> (ApiServer, kube::Client) {
    let api = start_apiserver(dir, &[]);
    let client = volhealth_kube_access::client::load(Some(&api.kubeconfig))
        .await
        .unwrap()
        .client;
    (api, client)
}

/// Node `name` and its CSINode, healthy.
async fn node(client: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let n: Node = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {}})).unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
    let csinodes: Api<CSINode> = Api::all(client.clone());
    let c: CSINode = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"drivers": [{"name": "hostpath.volhealth.io", "nodeID": name}]}}))
    .unwrap();
    csinodes.create(&PostParams::default(), &c).await.unwrap();
}

/// Sets the CSINode's StorageUnreachable condition, begun at `since` (None: healthy).
async fn set_condition(client: &kube::Client, name: &str, since: Option<&str>) {
    let csinodes: Api<CSINode> = Api::all(client.clone());
    let value = match since {
        Some(s) => json!([{"name": "hostpath.volhealth.io", "healthConditions": [
            {"status": "StorageUnreachable", "reason": "NetworkPartition", "lastTransitionTime": s}]}]),
        None => serde_json::Value::Null,
    };
    csinodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"storageHealth": value}})),
        )
        .await
        .unwrap();
}

async fn taints(client: &kube::Client, name: &str) -> (Vec<String>, bool) {
    let n = Api::<Node>::all(client.clone()).get(name).await.unwrap();
    let spec = n.spec.unwrap_or_default();
    let keys = spec
        .taints
        .unwrap_or_default()
        .into_iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    (keys, spec.unschedulable.unwrap_or(false))
}

/// Waits (as `what`) until `node` carries the policy's taint and is cordoned.
async fn wait_tainted_and_cordoned(client: &kube::Client, node: &str, what: &str) {
    let want = (
        vec!["volhealth.io/storage-unreachable:NoSchedule".to_string()],
        true,
    );
    wait_until(WAIT, what, || async { taints(client, node).await == want }).await;
}

fn start(client: &kube::Client, dry_run: bool) -> tokio::sync::oneshot::Sender<()> {
    let config = ControllerConfig {
        policy: Policy::parse(POLICY).unwrap(),
        dry_run,
        tick: Duration::from_millis(50),
    };
    let actions = actions_family(&mut Registry::default());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(client.clone(), config, actions, async move {
        let _ = rx.await;
    }));
    tx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_condition_taints_and_cordons_and_clearing_untaints() {
    let dir = tempfile::tempdir().unwrap();
    let (_api, client) = apiserver(dir.path()).await;
    node(&client, "node-1").await;
    node(&client, "node-2").await;
    // Held for an hour already: a restart of the controller does not restart the clock.
    set_condition(&client, "node-2", Some("2026-01-01T00:00:00Z")).await;
    // Just began: not held for 1m yet.
    let fresh = jiff::Timestamp::now().to_string();
    set_condition(&client, "node-1", Some(&fresh)).await;
    let _stop = start(&client, false);
    wait_tainted_and_cordoned(&client, "node-2", "node-2 tainted and cordoned").await;
    assert_eq!(
        taints(&client, "node-1").await,
        (vec![], false),
        "not held long enough"
    );
    set_condition(&client, "node-2", None).await;
    wait_until(WAIT, "node-2 untainted", || async {
        taints(&client, "node-2").await.0.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_changes_nothing_and_says_what_it_would_do() {
    let dir = tempfile::tempdir().unwrap();
    let (_api, client) = apiserver(dir.path()).await;
    node(&client, "node-2").await;
    set_condition(&client, "node-2", Some("2026-01-01T00:00:00Z")).await;
    let _stop = start(&client, true);
    wait_event(&client, WAIT, "a dry-run Event", |e| {
        e.involved_object.name.as_deref() == Some("node-2")
            && e.message
                .as_deref()
                .is_some_and(|m| m.starts_with("dry run: would taint node node-2"))
    })
    .await;
    assert_eq!(taints(&client, "node-2").await, (vec![], false));
}

/// A replica with leader election on, acting with `policy`; it stops (and releases the Lease)
/// when the sender is used or dropped.
fn replica(kubeconfig: &Path, identity: &str, policy: &str) -> tokio::sync::oneshot::Sender<()> {
    use volhealth_remediate::controller::{LeaderElection, serve};
    let config = ControllerConfig {
        policy: Policy::parse(policy).unwrap(),
        dry_run: false,
        tick: Duration::from_millis(50),
    };
    let election = LeaderElection {
        namespace: Some("default".into()),
        identity: Some(identity.into()),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_secs(1),
        labels: Default::default(),
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let kubeconfig = kubeconfig.to_path_buf();
    tokio::spawn(async move {
        serve(
            Some(&kubeconfig),
            config,
            None,
            Some(election),
            async move {
                let _ = rx.await;
            },
        )
        .await
        .unwrap();
    });
    tx
}

async fn lease_holder(client: &kube::Client) -> Option<String> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    leases
        .get_opt(volhealth_remediate::leader::LEASE_NAME)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// Of two replicas only the Lease holder acts; when it stops, the other takes the Lease and acts.
/// The replicas carry different policies (one taints, one cordons), so what was done says who
/// did it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_a_successor_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let (_api, client) = apiserver(dir.path()).await;
    let kubeconfig = dir.path().join("kubeconfig");
    node(&client, "node-2").await;
    let tainting = "\
rules:
- name: taint-unreachable
  match: {object: CSINode, status: StorageUnreachable, reason: \"*\", driver: \"*\"}
  for: 1m
  actions: [{taint: {key: volhealth.io/storage-unreachable, effect: NoSchedule}}]
";
    let cordoning = "\
rules:
- name: cordon-unreachable
  match: {object: CSINode, status: StorageUnreachable, reason: \"*\", driver: \"*\"}
  for: 1m
  actions: [cordon]
";
    let first = replica(&kubeconfig, "replica-a", tainting);
    wait_until(WAIT, "replica-a to hold the Lease", || async {
        lease_holder(&client).await.as_deref() == Some("replica-a")
    })
    .await;
    let second = replica(&kubeconfig, "replica-b", cordoning);

    set_condition(&client, "node-2", Some("2026-01-01T00:00:00Z")).await;
    wait_until(WAIT, "the leader's taint", || async {
        !taints(&client, "node-2").await.0.is_empty()
    })
    .await;
    // Twenty of the follower's ticks: it must not act.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !taints(&client, "node-2").await.1,
        "the follower cordoned the node"
    );
    assert_eq!(
        lease_holder(&client).await.as_deref(),
        Some("replica-a"),
        "the leader kept the Lease"
    );

    first.send(()).unwrap();
    wait_until(WAIT, "replica-b to take the Lease", || async {
        lease_holder(&client).await.as_deref() == Some("replica-b")
    })
    .await;
    wait_until(WAIT, "the new leader's cordon", || async {
        taints(&client, "node-2").await.1
    })
    .await;
    drop(second);
}

/// A replica whose Lease confirmation is older than the renew deadline does not act, although
/// nothing told it that it lost the Lease; once confirmed again, it acts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_does_not_act_once_its_lease_is_not_fresh() {
    use volhealth_remediate::controller::{Leadership, run_while_leader};
    let dir = tempfile::tempdir().unwrap();
    let (_api, client) = apiserver(dir.path()).await;
    node(&client, "node-2").await;
    let leadership = Leadership::with_renew_deadline(Duration::from_millis(500));
    leadership.confirm(true);
    // The confirmation ages past the renew deadline with no renewal.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!leadership.is_fresh());
    let config = ControllerConfig {
        policy: Policy::parse(POLICY).unwrap(),
        dry_run: false,
        tick: Duration::from_millis(50),
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run_while_leader(
        client.clone(),
        client.clone(),
        config,
        actions_family(&mut Registry::default()),
        leadership.clone(),
        async move {
            let _ = rx.await;
        },
    ));
    set_condition(&client, "node-2", Some("2026-01-01T00:00:00Z")).await;
    // Twenty ticks with a held condition: nothing is done on a stale Lease.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(taints(&client, "node-2").await, (vec![], false));
    // Confirmed again (and kept fresh): the planned actions, put back, are carried out.
    let keep = leadership.clone();
    let renewing = tokio::spawn(async move {
        loop {
            keep.confirm(true);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    wait_tainted_and_cordoned(&client, "node-2", "the taint and cordon once fresh again").await;
    renewing.abort();
    let _ = tx.send(());
}
