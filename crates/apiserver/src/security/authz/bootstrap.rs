//! The bootstrap RBAC policy kube-apiserver creates at start when it is missing: cluster-admin
//! for `system:masters`, the self-reviews for every authenticated user, and discovery, version
//! and health checks for everyone.

use super::rbac::GROUP;
use super::{AUTHENTICATED, MASTERS, UNAUTHENTICATED};
use crate::errors::ApiError;
use crate::kinds::names::name_of;
use crate::registry;
use crate::storage::store::{Outcome, Store};
use serde_json::{Value, json};

fn meta(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRole", "metadata": meta(name), "rules": rules})
}

fn binding_to_groups(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRoleBinding",
        "metadata": meta(name),
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

const HEALTH_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];

/// The bootstrap ClusterRoles, then their ClusterRoleBindings.
pub fn policy() -> Vec<(&'static str, Value)> {
    let mut discovery: Vec<&str> = vec![
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
    ];
    discovery.extend_from_slice(HEALTH_PATHS);
    vec![
        (
            "clusterroles",
            cluster_role(
                "cluster-admin",
                json!([
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {"nonResourceURLs": ["*"], "verbs": ["*"]},
                ]),
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "system:basic-user",
                json!([
                    {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
                ]),
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "system:discovery",
                json!([{"nonResourceURLs": discovery, "verbs": ["get"]}]),
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "system:public-info-viewer",
                json!([{"nonResourceURLs": HEALTH_PATHS, "verbs": ["get"]}]),
            ),
        ),
        (
            "clusterrolebindings",
            binding_to_groups("cluster-admin", "cluster-admin", &[MASTERS]),
        ),
        (
            "clusterrolebindings",
            binding_to_groups("system:basic-user", "system:basic-user", &[AUTHENTICATED]),
        ),
        (
            "clusterrolebindings",
            binding_to_groups("system:discovery", "system:discovery", &[AUTHENTICATED]),
        ),
        (
            "clusterrolebindings",
            binding_to_groups(
                "system:public-info-viewer",
                "system:public-info-viewer",
                &[AUTHENTICATED, UNAUTHENTICATED],
            ),
        ),
    ]
}

/// Creates each bootstrap object that does not exist; existing ones are left as they are, so an
/// administrator's changes survive restarts.
pub fn ensure(store: &Store) -> Result<(), ApiError> {
    for (plural, mut obj) in policy() {
        let def = registry::find(GROUP, "v1", plural)
            .ok_or_else(|| ApiError::internal(format!("{plural} are not registered")))?;
        let name = name_of(&obj).to_string();
        if store.get(&def.store_name(), "", &name).is_some() {
            continue;
        }
        crate::kinds::objects::prepare_create(def, &mut obj, "")?;
        crate::kinds::validation::validate(def, &obj)?;
        store.mutate(&def.store_name(), "", &name, |old| {
            Ok(if old.is_some() {
                Outcome::Unchanged
            } else {
                Outcome::Put(obj)
            })
        })?;
    }
    Ok(())
}
