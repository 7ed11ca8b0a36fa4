//! The Node authorizer: scopes `system:node:NAME` identities to what a kubelet needs, the way
//! kube-apiserver's Node authorizer and NodeRestriction admission do.

use super::{Attributes, Decision, User};
use crate::registry;
use crate::storage::store::Store;
use serde_json::Value;

/// The (group, resource) pairs the Node authorizer decides for node identities; it has no
/// opinion on any other resource.
const NODE_RESOURCES: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "nodes"),
    ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"),
    ("", "secrets"),
    ("", "namespaces"),
    ("", "events"),
    ("events.k8s.io", "events"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "volumeattachments"),
    ("coordination.k8s.io", "leases"),
];

/// What the node authorizer knows of the objects a request touches.
#[derive(Clone, Copy)]
pub enum Binding<'a> {
    /// Look the stored pod or the pods referencing a Secret up in the store.
    Lookup(&'a Store),
    /// Take this as the node the object is bound to (None: bound to none).
    Assume(Option<&'a str>),
}

impl std::fmt::Debug for Binding<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Binding::Lookup(_) => f.write_str("Lookup"),
            Binding::Assume(n) => f.debug_tuple("Assume").field(n).finish(),
        }
    }
}

/// The claims the pods bound to `node` use (`spec.volumes[].persistentVolumeClaim.claimName`), as
/// (namespace, name).
fn claims_of_node_pods(store: &Store, node: &str) -> Vec<(String, String)> {
    let Some(pods) = registry::find("", "v1", "pods") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in store.on_node(&pods.store_name(), node) {
        let ns = p
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let volumes = p.pointer("/spec/volumes").and_then(Value::as_array);
        for v in volumes.into_iter().flatten() {
            if let Some(claim) = v
                .pointer("/persistentVolumeClaim/claimName")
                .and_then(Value::as_str)
            {
                out.push((ns.to_string(), claim.to_string()));
            }
        }
    }
    out
}

/// The node `a`'s object is bound to, as `decide` needs it: the stored pod's spec.nodeName for a
/// named pod; for a Secret, PVC or PV get, the requesting node when a pod bound to it uses the
/// object (references the Secret, names the claim, or names a claim bound to the volume).
pub fn bound_node(user: &User, a: &Attributes<'_>, binding: Binding<'_>) -> Option<String> {
    let store = match binding {
        Binding::Assume(n) => return n.map(str::to_string),
        Binding::Lookup(store) => store,
    };
    let node = user.node_name()?;
    let pods = registry::find("", "v1", "pods")?;
    match (a.group, a.resource) {
        ("", "pods") if !a.name.is_empty() => store
            .get(&pods.store_name(), a.namespace, a.name)
            .and_then(|p| {
                p.pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }),
        ("", "secrets") if a.verb == "get" => store
            .on_node(&pods.store_name(), node)
            .iter()
            .any(|p| {
                p.pointer("/metadata/namespace").and_then(Value::as_str) == Some(a.namespace)
                    && crate::kinds::secrets::referenced_by_pod(p, a.name)
            })
            .then(|| node.to_string()),
        ("", "persistentvolumeclaims") if a.verb == "get" => claims_of_node_pods(store, node)
            .iter()
            .any(|(ns, name)| ns == a.namespace && name == a.name)
            .then(|| node.to_string()),
        ("", "persistentvolumes") if a.verb == "get" => {
            let claims = registry::find("", "v1", "persistentvolumeclaims")?;
            claims_of_node_pods(store, node)
                .iter()
                .any(|(ns, name)| {
                    store
                        .get(&claims.store_name(), ns, name)
                        .and_then(|c| {
                            c.pointer("/spec/volumeName")
                                .and_then(Value::as_str)
                                .map(|v| v == a.name)
                        })
                        .unwrap_or(false)
                })
                .then(|| node.to_string())
        }
        _ => None,
    }
}

const READ: &[&str] = &["get", "list", "watch"];

/// The Node authorizer's decision on `a` by `user`. `bound_node` is the spec.nodeName of the
/// stored pod, for writes to an existing pod; for a Secret get it is the requesting node when a
/// pod bound to that node references the Secret. It has no opinion on other identities, nor on
/// resources outside what nodes use (the next authorizer decides those).
pub fn decide(user: &User, a: &Attributes<'_>, bound_node: Option<&str>) -> Decision {
    let Some(node) = user.node_name() else {
        return Decision::NoOpinion(String::new());
    };
    if !NODE_RESOURCES.contains(&(a.group, a.resource)) {
        return Decision::NoOpinion(String::new());
    }
    let read = READ.contains(&a.verb);
    let own = a.name == node;
    let allowed = match (a.group, a.resource, a.subresource) {
        ("", "pods", "") if read => true,
        ("", "pods", "status") if a.verb == "get" => true,
        ("", "pods", "status") if matches!(a.verb, "patch" | "update") => {
            if bound_node == Some(node) {
                true
            } else {
                return Decision::Deny(format!(
                    "node \"{node}\" can only update pod status for pods with spec.nodeName set to \"{node}\""
                ));
            }
        }
        ("", "pods", "") if a.verb == "delete" => {
            if bound_node == Some(node) {
                true
            } else {
                return Decision::Deny(format!(
                    "node \"{node}\" can only delete pods with spec.nodeName set to \"{node}\""
                ));
            }
        }
        ("", "nodes", "") | ("", "nodes", "status") if read => true,
        ("", "nodes", "") | ("", "nodes", "status")
            if matches!(a.verb, "create" | "update" | "patch") =>
        {
            if own {
                true
            } else {
                return Decision::Deny(format!(
                    "node \"{node}\" can only modify its own Node object"
                ));
            }
        }
        ("storage.k8s.io", "csinodes", "") | ("storage.k8s.io", "csinodes", "status") if read => {
            true
        }
        ("storage.k8s.io", "csinodes", "") | ("storage.k8s.io", "csinodes", "status")
            if matches!(a.verb, "create" | "update" | "patch" | "delete") =>
        {
            if own {
                true
            } else {
                return Decision::Deny(format!(
                    "node \"{node}\" can only modify the CSINode object named \"{node}\""
                ));
            }
        }
        // As kube's Node authorizer: a node gets the claims, volumes and secrets its pods use,
        // one by name, and lists or watches none of them.
        ("", "persistentvolumeclaims", "")
        | ("", "persistentvolumeclaims", "status")
        | ("", "persistentvolumes", "")
        | ("", "secrets", "")
            if a.verb == "get" =>
        {
            if bound_node == Some(node) {
                true
            } else {
                return Decision::Deny(format!(
                    "no relationship found between node '{node}' and this object"
                ));
            }
        }
        ("", "persistentvolumeclaims", "") | ("", "persistentvolumes", "") if read => {
            return Decision::Deny(format!(
                "node \"{node}\" may only get the claims and volumes of pods bound to it, one by name"
            ));
        }
        ("", "persistentvolumeclaims", "status") => {
            return Decision::Deny(
                "nodes may not write PersistentVolumeClaim status; only the health monitor does"
                    .into(),
            );
        }
        ("", "secrets", "") => {
            return Decision::Deny(format!(
                "node \"{node}\" may only get secrets referenced by pods bound to it, one by name"
            ));
        }
        ("", "namespaces", "") if read => true,
        ("storage.k8s.io", "csidrivers" | "storageclasses" | "volumeattachments", "") if read => {
            true
        }
        ("", "events", "") | ("events.k8s.io", "events", "") => {
            read || matches!(a.verb, "create" | "update" | "patch")
        }
        ("coordination.k8s.io", "leases", "") => {
            if a.namespace == "kube-node-lease" && (own || (read && a.name.is_empty())) {
                true
            } else {
                return Decision::Deny(format!(
                    "node \"{node}\" can only access its own Lease in kube-node-lease"
                ));
            }
        }
        _ => false,
    };
    if allowed {
        Decision::Allow(String::new())
    } else {
        Decision::Deny(format!("node \"{node}\" is not allowed to do this"))
    }
}
