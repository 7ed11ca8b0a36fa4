//! `volhealth up --with-extender` end to end: a storage condition injected into one node plugin
//! travels through the agent to csinode.status.storageHealth, and the extender rejects exactly the
//! nodes the KEP's rules say: both examples, and the condition's accessMode / volumeMode scoping.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;
use serde_json::{Value, json};

const DRIVER: &str = "hostpath.volhealth.io";

/// Sets the driver's policy annotation, as the admin of `<dir>/kubeconfig`.
fn set_policy(c: &Cluster, policy: &str) {
    let body =
        json!({"metadata": {"annotations": {"volhealth.io/health-scheduling-policy": policy}}});
    let (code, _, answer) = support::kube_request(
        &c.kubeconfig,
        "PATCH",
        &format!("/apis/storage.k8s.io/v1/csidrivers/{DRIVER}"),
        None,
        &body.to_string(),
    )
    .expect("patching the CSIDriver");
    assert_eq!(code, 200, "patching the CSIDriver: {answer}");
}

/// The nodes the extender rejects for a pod using claim `data-1` (ReadWriteOnce, Filesystem).
fn rejected(url: &str) -> Option<Vec<String>> {
    let args = json!({
        "Pod": {"metadata": {"name": "new", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}],
                         "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data-1"}}]}},
        "Nodes": null,
        "NodeNames": ["node-1", "node-2", "node-3"]
    });
    let v: Value = support::block_on(async {
        reqwest::Client::new()
            .post(format!("{url}/filter"))
            .json(&args)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()
    })?;
    let mut out: Vec<String> = v["FailedAndUnresolvableNodes"]
        .as_object()?
        .keys()
        .cloned()
        .collect();
    out.sort();
    Some(out)
}

fn wait_rejected(c: &Cluster, url: &str, want: &[&str]) {
    let mut last = None;
    c.eventually(&format!("the extender to reject {want:?}"), || {
        last = rejected(url);
        last.as_deref().is_some_and(|r| r == want)
    });
}

#[test]
fn the_extender_rejects_the_nodes_the_keps_rules_say() {
    let port = support::free_port();
    let listen = format!("127.0.0.1:{port}");
    let c = Cluster::start_with(3, &["--with-extender", "--extender-listen", &listen]);
    let url = format!("http://{listen}");
    let up = std::fs::read_to_string(c.up_log()).unwrap();
    assert!(up.contains(&format!("{url}/filter")), "{up}");

    // No policy: nothing is filtered, whatever the storage health.
    c.inject_storage("node-2", "StorageUnreachable", "NetworkPartition", &[]);
    c.wait_storage("node-2", "StorageUnreachable");
    wait_rejected(&c, &url, &[]);

    // Example 1: block all pods when unreachable.
    set_policy(&c, "rules:\n  - status: StorageUnreachable\n");
    wait_rejected(&c, &url, &["node-2"]);

    // Example 2: degraded blocks only ReadWriteOnce claims (data-1 is one); a degraded condition
    // scoped to ReadWriteMany, or to Block volumes, does not cover data-1.
    c.inject_storage(
        "node-1",
        "StorageDegraded",
        "NfsSlow",
        &["--access-mode", "ReadWriteMany"],
    );
    c.inject_storage(
        "node-3",
        "StorageDegraded",
        "BlockPathSlow",
        &["--volume-mode", "Block"],
    );
    c.wait_storage("node-1", "StorageDegraded");
    c.wait_storage("node-3", "StorageDegraded");
    set_policy(
        &c,
        "rules:\n  - status: StorageUnreachable\n  - status: StorageDegraded\n    accessModes: [ReadWriteOnce]\n",
    );
    wait_rejected(&c, &url, &["node-2"]);

    // Unscoped degraded on node-3 now covers data-1.
    c.inject_storage("node-3", "StorageDegraded", "PhysicalVolumeMissing", &[]);
    wait_rejected(&c, &url, &["node-2", "node-3"]);

    // Recovery lets the node back in.
    c.inject(&["clear", "storage", "--node", "node-2"]);
    wait_rejected(&c, &url, &["node-3"]);
}
