//! The agent's ValidatingAdmissionPolicy (`deploy/kubernetes/agent/admission-policy.yaml`), read
//! from the shipped file and run by a CEL interpreter against admission requests as the API server
//! would build them: the agent may write the status of pods bound to its own node and its own
//! node's CSINode, and nothing of another node; other users are not matched at all.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use serde_json::{Value, json};
use volhealth_deploy_tests::admission::{Decision, Policy, Request};
use volhealth_deploy_tests::manifests;

const AGENT: &str = "system:serviceaccount:kube-system:volhealth-agent";
const NODE_CLAIM: &str = "authentication.kubernetes.io/node-name";
// The policy's denials: a pod of another node, another node's CSINode, a token without its node.
const NOT_ITS_POD: &str = "may only write the status of pods bound to that node";
const NOT_ITS_CSINODE: &str = "may only write the CSINode of that node";
const NO_NODE_CLAIM: &str = "has no authentication.kubernetes.io/node-name claim";
/// The writes of a CSINode the agent makes: (operation, subresource).
const CSINODE_WRITES: [(&str, &str); 3] = [("CREATE", ""), ("UPDATE", ""), ("UPDATE", "status")];

fn policy_file() -> Vec<Value> {
    manifests::documents(&manifests::dir().join("agent/admission-policy.yaml")).unwrap()
}

fn policy() -> Policy {
    let docs = policy_file();
    let vap = manifests::the_one(&docs, "ValidatingAdmissionPolicy").expect("one policy");
    Policy::from_object(vap).unwrap()
}

/// The user of a pod's bound service account token on `node` (None: a token without the claim).
fn user(username: &str, node: Option<&str>) -> Value {
    let mut extra = json!({
        "authentication.kubernetes.io/pod-name": ["volhealth-agent-x7k2p"],
        "authentication.kubernetes.io/pod-uid": ["4f6c1e8a-0d1b-4c59-9a55-1b2f0c3d4e5f"],
        "authentication.kubernetes.io/credential-id": ["JTI=0a1b2c3d"],
    });
    if let Some(node) = node {
        extra[NODE_CLAIM] = json!([node]);
        extra["authentication.kubernetes.io/node-uid"] =
            json!(["9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"]);
    }
    json!({
        "username": username,
        "uid": "1c2d3e4f",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
        "extra": extra,
    })
}

/// The agent on node-a, the writer of most requests here.
fn node_a_agent() -> Value {
    user(AGENT, Some("node-a"))
}

fn pod(name: &str, node: Option<&str>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": "a1b2"},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
        "status": {"phase": "Running"},
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// PATCH pods/NAME/status by `user`: an UPDATE of the status subresource to admission.
fn pod_status_patch(user: Value, pod_node: Option<&str>) -> Request {
    let old = pod("web-1", pod_node);
    let mut new = old.clone();
    new["status"]["volumeHealth"] = json!([{"name": "data", "conditions": [
        {"status": "Inaccessible", "reason": "BackingDataMissing", "message": "gone"}]}]);
    Request {
        request: json!({
            "uid": "r1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "status",
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "status",
            "name": "web-1",
            "namespace": "default",
            "operation": "UPDATE",
            "userInfo": user,
            "dryRun": false,
        }),
        object: new,
        old_object: old,
    }
}

fn csinode(name: &str) -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": "hostpath.volhealth.io", "nodeID": name}]},
    })
}

/// A write of CSINode `name` by `user`: CREATE (POST), UPDATE (PATCH), or UPDATE of `status`.
fn csinode_write(user: Value, name: &str, operation: &str, sub_resource: &str) -> Request {
    let old = if operation == "CREATE" {
        Value::Null
    } else {
        csinode(name)
    };
    let mut new = csinode(name);
    if sub_resource == "status" {
        new["status"] = json!({"storageHealth": [{"driver": "hostpath.volhealth.io", "conditions": [
            {"status": "StorageUnreachable", "reason": "NetworkPartition", "message": "no route"}]}]});
    }
    let mut request = json!({
        "uid": "r2",
        "kind": {"group": "storage.k8s.io", "version": "v1", "kind": "CSINode"},
        "resource": {"group": "storage.k8s.io", "version": "v1", "resource": "csinodes"},
        "name": name,
        "operation": operation,
        "userInfo": user,
        "dryRun": false,
    });
    if !sub_resource.is_empty() {
        request["subResource"] = json!(sub_resource);
    }
    Request {
        request,
        object: new,
        old_object: old,
    }
}

fn denied(decision: Decision, why: &str) {
    match decision {
        Decision::Denied(messages) => assert!(
            messages.iter().any(|m| m.contains(why)),
            "denied, but not for {why:?}: {messages:?}"
        ),
        other => panic!("expected a denial for {why:?}, got {other:?}"),
    }
}

#[test]
fn the_agent_may_write_the_status_of_its_own_nodes_pods() {
    let p = policy();
    let d = p.admit(&pod_status_patch(node_a_agent(), Some("node-a")));
    assert_eq!(d, Decision::Allowed);
}

#[test]
fn the_agent_may_not_write_the_status_of_another_nodes_pods() {
    let p = policy();
    let d = p.admit(&pod_status_patch(node_a_agent(), Some("node-b")));
    denied(d, NOT_ITS_POD);
    // A pod not bound to any node is nobody's to write.
    let d = p.admit(&pod_status_patch(node_a_agent(), None));
    denied(d, NOT_ITS_POD);
}

/// What the policy answers node-a's agent writing the status of a pod stored on `stored` with a
/// new object that names `new` as the pod's node.
fn admit_moved_pod(stored: &str, new: &str) -> Decision {
    let mut r = pod_status_patch(node_a_agent(), Some(stored));
    r.object["spec"]["nodeName"] = json!(new);
    policy().admit(&r)
}

#[test]
fn a_pod_moved_onto_the_agents_node_in_the_request_is_still_refused() {
    // The stored pod is on node-b; a request whose new object claims node-a must not pass.
    denied(admit_moved_pod("node-b", "node-a"), NOT_ITS_POD);
}

#[test]
fn a_write_naming_another_node_in_the_new_object_is_refused() {
    // The status subresource keeps the stored spec, but the policy does not rely on it.
    denied(admit_moved_pod("node-a", "node-b"), NOT_ITS_POD);
}

#[test]
fn the_agent_may_write_its_own_nodes_csinode() {
    let p = policy();
    for (operation, sub) in CSINODE_WRITES {
        let d = p.admit(&csinode_write(node_a_agent(), "node-a", operation, sub));
        assert_eq!(d, Decision::Allowed, "{operation} csinodes/{sub}");
    }
}

#[test]
fn the_agent_may_not_write_another_nodes_csinode() {
    let p = policy();
    for (operation, sub) in CSINODE_WRITES {
        let d = p.admit(&csinode_write(node_a_agent(), "node-b", operation, sub));
        denied(d, NOT_ITS_CSINODE);
    }
}

#[test]
fn a_token_without_the_node_claim_is_refused() {
    let p = policy();
    let no_claim = user(AGENT, None);
    denied(
        p.admit(&pod_status_patch(no_claim.clone(), Some("node-a"))),
        NO_NODE_CLAIM,
    );
    denied(
        p.admit(&csinode_write(no_claim, "node-a", "UPDATE", "status")),
        NO_NODE_CLAIM,
    );
    // No extra info at all (a legacy secret-based token).
    let mut bare = user(AGENT, None);
    bare.as_object_mut().unwrap().remove("extra");
    denied(
        p.admit(&pod_status_patch(bare, Some("node-a"))),
        NO_NODE_CLAIM,
    );
    // Two node names say nothing about which node the agent is on.
    let mut two = node_a_agent();
    two["extra"][NODE_CLAIM] = json!(["node-a", "node-b"]);
    denied(
        p.admit(&pod_status_patch(two, Some("node-a"))),
        NO_NODE_CLAIM,
    );
}

#[test]
fn other_users_are_not_matched() {
    let p = policy();
    for username in [
        "system:serviceaccount:kube-system:csi-external-health-monitor",
        // Names that merely end in, start with or contain the agent's.
        "system:serviceaccount:kube-system:not-volhealth-agent",
        "system:serviceaccount:kube-system:volhealth-agent-2",
        "system:serviceaccount:volhealth-agent:volhealth-remediate",
        "volhealth-agent",
        "system:volhealth-agent",
        "system:node:node-b",
        "admin",
    ] {
        let d = p.admit(&pod_status_patch(
            user(username, Some("node-a")),
            Some("node-b"),
        ));
        assert_eq!(d, Decision::NotMatched, "{username} on a pod");
        let d = p.admit(&csinode_write(
            user(username, None),
            "node-b",
            "UPDATE",
            "status",
        ));
        assert_eq!(d, Decision::NotMatched, "{username} on a CSINode");
    }
}

#[test]
fn the_agent_is_kept_to_its_node_in_any_namespace() {
    // The policy is cluster-scoped, so a kustomize `namespace:` cannot rewrite it: it matches
    // the agent's service account by name in whatever namespace the kit is rendered into.
    let p = policy();
    for namespace in ["kube-system", "storage-system", "other"] {
        let agent = format!("system:serviceaccount:{namespace}:volhealth-agent");
        assert_eq!(
            p.admit(&pod_status_patch(
                user(&agent, Some("node-a")),
                Some("node-a")
            )),
            Decision::Allowed,
            "{agent}"
        );
        denied(
            p.admit(&pod_status_patch(
                user(&agent, Some("node-a")),
                Some("node-b"),
            )),
            NOT_ITS_POD,
        );
        denied(
            p.admit(&csinode_write(
                user(&agent, Some("node-a")),
                "node-b",
                "UPDATE",
                "status",
            )),
            NOT_ITS_CSINODE,
        );
    }
}

#[test]
fn requests_outside_the_constraints_are_not_matched() {
    let p = policy();
    // The pod itself (not its status), and a delete: the agent's RBAC grants neither.
    let mut r = pod_status_patch(node_a_agent(), Some("node-b"));
    r.request.as_object_mut().unwrap().remove("subResource");
    assert_eq!(p.admit(&r), Decision::NotMatched);
    let mut r = csinode_write(node_a_agent(), "node-b", "UPDATE", "");
    r.request["operation"] = json!("DELETE");
    r.object = Value::Null;
    assert_eq!(p.admit(&r), Decision::NotMatched);
    // An Event: not the policy's business.
    let r = Request {
        request: json!({
            "resource": {"group": "", "version": "v1", "resource": "events"},
            "operation": "CREATE",
            "namespace": "default",
            "userInfo": node_a_agent(),
        }),
        object: json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}}),
        old_object: Value::Null,
    };
    assert_eq!(p.admit(&r), Decision::NotMatched);
}

#[test]
fn the_binding_enforces_the_policy() {
    let docs = policy_file();
    let vap = manifests::the_one(&docs, "ValidatingAdmissionPolicy").unwrap();
    let binding = manifests::the_one(&docs, "ValidatingAdmissionPolicyBinding").expect("a binding");
    assert_eq!(binding["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(vap["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(binding["spec"]["policyName"], vap["metadata"]["name"]);
    let actions = binding["spec"]["validationActions"].as_array().unwrap();
    assert!(actions.iter().any(|a| a == "Deny"), "{actions:?}");
    // A binding with no paramRef and no matchResources narrowing: every namespace.
    assert!(binding["spec"].get("matchResources").is_none());
    assert_eq!(vap["spec"]["failurePolicy"], "Fail");
}
