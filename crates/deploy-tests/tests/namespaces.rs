//! The kit rendered into another namespace (`deploy/kubernetes/namespace-example`, a
//! `namespace: storage-system` over the bases) still works: every namespaced object and every
//! binding's subject moves with it, nothing is left naming `kube-system`, remediate's Lease is in
//! its pod's namespace, and the agent's admission policy still keeps the agent, now
//! `system:serviceaccount:storage-system:volhealth-agent`, to its own node.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use serde_json::{Value, json};
use volhealth_deploy_tests::admission::{Decision, Policy, Request};
use volhealth_deploy_tests::manifests::{self, the_one};

const NAMESPACE: &str = "storage-system";

fn rendered() -> Option<Vec<Value>> {
    manifests::kustomize(&manifests::dir().join("namespace-example")).unwrap()
}

fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

/// A status write of `pod` (bound to `pod_node`) by `username`, whose token names `token_node`.
fn pod_status_write(username: &str, token_node: &str, pod_node: &str) -> Request {
    let pod = json!({
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {"nodeName": pod_node},
    });
    Request {
        request: json!({
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "status",
            "name": "web-1",
            "namespace": "default",
            "operation": "UPDATE",
            "userInfo": {"username": username, "extra": {
                "authentication.kubernetes.io/node-name": [token_node]}},
        }),
        object: pod.clone(),
        old_object: pod,
    }
}

#[test]
fn the_agents_policy_keeps_it_to_its_node_in_another_namespace() {
    let Some(objects) = rendered() else {
        return;
    };
    let sa = named(&objects, "ServiceAccount", "volhealth-agent");
    assert_eq!(sa["metadata"]["namespace"], NAMESPACE);
    let ds = the_one(&objects, "DaemonSet").expect("the agent's DaemonSet");
    assert_eq!(ds["metadata"]["namespace"], NAMESPACE);
    assert_eq!(
        ds["spec"]["template"]["spec"]["serviceAccountName"],
        sa["metadata"]["name"]
    );
    let agent = format!("system:serviceaccount:{NAMESPACE}:volhealth-agent");
    let policy =
        Policy::from_object(the_one(&objects, "ValidatingAdmissionPolicy").unwrap()).unwrap();
    // Node scoping still applies to the agent in its new namespace: its own node's pods only.
    assert_eq!(
        policy.admit(&pod_status_write(&agent, "node-a", "node-a")),
        Decision::Allowed
    );
    match policy.admit(&pod_status_write(&agent, "node-a", "node-b")) {
        Decision::Denied(m) => assert!(
            m.iter()
                .any(|m| m.contains("may only write the status of pods bound to that node")),
            "{m:?}"
        ),
        other => panic!("another node's pod was not refused: {other:?}"),
    }
    // The other accounts of the kit, in the same namespace, are not the policy's business.
    for other in ["csi-external-health-monitor", "volhealth-remediate"] {
        let user = format!("system:serviceaccount:{NAMESPACE}:{other}");
        assert_eq!(
            policy.admit(&pod_status_write(&user, "node-a", "node-b")),
            Decision::NotMatched,
            "{user}"
        );
    }
}

#[test]
fn every_object_and_subject_follows_the_namespace() {
    let Some(objects) = rendered() else {
        return;
    };
    let text = serde_json::to_string(&objects).unwrap();
    assert!(
        !text.contains("kube-system"),
        "something still names kube-system"
    );
    for o in &objects {
        let kind = o["kind"].as_str().unwrap();
        let namespaced = !matches!(
            kind,
            "ClusterRole"
                | "ClusterRoleBinding"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
        );
        if namespaced {
            assert_eq!(
                o["metadata"]["namespace"], NAMESPACE,
                "{kind} {}",
                o["metadata"]["name"]
            );
        }
        for s in o["subjects"].as_array().into_iter().flatten() {
            assert_eq!(
                s["namespace"], NAMESPACE,
                "{kind} {}",
                o["metadata"]["name"]
            );
        }
    }
}

#[test]
fn remediate_takes_its_lease_namespace_from_its_pod() {
    let Some(objects) = rendered() else {
        return;
    };
    let d = named(&objects, "Deployment", "volhealth-remediate");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    let args = manifests::args(c).expect("remediate's args");
    assert!(args.contains(&"--leader-election"), "{args:?}");
    let ns_arg = args
        .iter()
        .find_map(|a| a.strip_prefix("--leader-election-namespace="))
        .expect("--leader-election-namespace");
    let var = ns_arg
        .strip_prefix("$(")
        .and_then(|v| v.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{ns_arg} is not the pod's namespace"));
    let env = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == var)
        .unwrap_or_else(|| panic!("{var} is not set"));
    assert_eq!(
        env["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    // Its Lease Role is where the pod is.
    let role = named(&objects, "Role", "volhealth-remediate-leader-election");
    assert_eq!(role["metadata"]["namespace"], d["metadata"]["namespace"]);
}
