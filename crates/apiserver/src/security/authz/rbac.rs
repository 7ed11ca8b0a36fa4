//! The RBAC authorizer: ClusterRoleBindings everywhere and RoleBindings in their namespace grant
//! the rules of the Role or ClusterRole they name, with kube-apiserver's matching of verbs, API
//! groups, resources and subresources, resourceNames and nonResourceURLs. `system:masters` may do
//! everything without a binding.

use super::{Attributes, Decision, MASTERS, Request, User, service_account_of};
use crate::kinds::names::name_of;
use crate::registry;
use crate::storage::store::Store;
use k8s_openapi::api::rbac::v1::{AggregationRule, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// The API group of the RBAC objects.
pub const GROUP: &str = "rbac.authorization.k8s.io";

fn any_or(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == "*" || v == want)
}

/// Whether `rule` names `resource` (with `subresource`): `*`, an exact `res` or `res/sub`, or
/// `*/sub`.
pub fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    let combined = if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    };
    rule.resources.iter().flatten().any(|r| {
        r == "*"
            || *r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
    })
}

/// Whether `rule` names the non-resource `path`: `*`, the exact path, or a prefix ending in `*`.
pub fn path_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().flatten().any(|u| {
        u == "*"
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// The name RBAC matches resourceNames against: none for creates and for collection verbs, as in
/// kube-apiserver (a rule with resourceNames never allows list, watch, create or
/// deletecollection).
fn rbac_name<'a>(a: &Attributes<'a>) -> &'a str {
    match a.verb {
        "create" | "list" | "watch" | "deletecollection" => "",
        _ => a.name,
    }
}

/// Whether `rule` allows `req`.
pub fn rule_allows(rule: &PolicyRule, req: &Request<'_>) -> bool {
    match req {
        Request::Resource(a) => {
            let name = rbac_name(a);
            any_or(&rule.verbs, a.verb)
                && any_or(rule.api_groups.as_deref().unwrap_or(&[]), a.group)
                && resource_matches(rule, a.resource, a.subresource)
                && rule
                    .resource_names
                    .as_ref()
                    .is_none_or(|names| names.is_empty() || names.iter().any(|n| n == name))
        }
        Request::Path { verb, path } => any_or(&rule.verbs, verb) && path_matches(rule, path),
    }
}

/// Whether `subject` of a binding in `binding_ns` ("" for a ClusterRoleBinding) is `user`.
pub fn subject_matches(subject: &Subject, binding_ns: &str, user: &User) -> bool {
    match subject.kind.as_str() {
        "User" => subject.name == user.name,
        "Group" => user.groups.contains(&subject.name),
        "ServiceAccount" => {
            let ns = subject
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            !ns.is_empty() && service_account_of(&user.name) == Some((ns, subject.name.as_str()))
        }
        _ => false,
    }
}

#[derive(Deserialize)]
struct Binding {
    #[serde(rename = "roleRef")]
    role_ref: RoleRef,
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
}

#[derive(Deserialize)]
struct Role {
    #[serde(default)]
    rules: Option<Vec<PolicyRule>>,
    #[serde(rename = "aggregationRule", default)]
    aggregation_rule: Option<AggregationRule>,
}

/// Whether `labels` (an object's `metadata.labels`) satisfy `selector`: matchLabels and the
/// In, NotIn, Exists and DoesNotExist expressions; an empty selector matches everything.
pub fn selector_matches(selector: &LabelSelector, labels: Option<&Value>) -> bool {
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let by_label = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| label(k) == Some(v.as_str()));
    let by_expression = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or(&[]);
        match (e.operator.as_str(), label(&e.key)) {
            ("In", Some(v)) => values.iter().any(|x| x == v),
            ("NotIn", Some(v)) => !values.iter().any(|x| x == v),
            ("NotIn", None) | ("Exists", Some(_)) | ("DoesNotExist", None) => true,
            _ => false,
        }
    });
    by_label && by_expression
}

/// The rules of a role object. A ClusterRole with an aggregationRule has the rules of every
/// ClusterRole its selectors match (recursively, each role once), as kube-apiserver's
/// aggregation controller would write them; they are resolved here, when authorizing, and the
/// stored object is not rewritten.
fn rules_of(store: &Store, obj: &Value, seen: &mut Vec<String>) -> Vec<PolicyRule> {
    let Ok(role) = Role::deserialize(obj) else {
        return Vec::new();
    };
    let Some(selectors) = role.aggregation_rule.and_then(|a| a.cluster_role_selectors) else {
        return role.rules.unwrap_or_default();
    };
    let (_, all) = store.list(&store_name("clusterroles"), None);
    let mut out: Vec<PolicyRule> = Vec::new();
    for other in all {
        let name = name_of(&other).to_string();
        let labels = other.pointer("/metadata/labels");
        if seen.contains(&name) || !selectors.iter().any(|s| selector_matches(s, labels)) {
            continue;
        }
        seen.push(name);
        for rule in rules_of(store, &other, seen) {
            if !out.contains(&rule) {
                out.push(rule);
            }
        }
    }
    out
}

fn store_name(plural: &str) -> String {
    registry::find(GROUP, "v1", plural)
        .map_or_else(|| format!("{plural}.{GROUP}"), |d| d.store_name())
}

/// One binding that applies to the user, with the rules of the role it names.
pub struct Grant {
    /// `ClusterRoleBinding` or `RoleBinding`.
    pub binding_kind: &'static str,
    /// The binding's name.
    pub binding: String,
    /// The binding's namespace ("" for a ClusterRoleBinding).
    pub namespace: String,
    /// `Role` or `ClusterRole`.
    pub role_kind: String,
    /// The role's name.
    pub role: String,
    /// The role's rules.
    pub rules: Vec<PolicyRule>,
}

/// Every grant of `user` that applies in `namespace` (cluster-wide ones always; RoleBindings
/// only when `namespace` is not empty), and the errors met resolving them (a missing role).
pub fn grants(store: &Store, user: &User, namespace: &str) -> (Vec<Grant>, Vec<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let (_, crbs) = store.list(&store_name("clusterrolebindings"), None);
    let mut bindings: Vec<(&'static str, Arc<Value>)> = crbs
        .into_iter()
        .map(|b| ("ClusterRoleBinding", b))
        .collect();
    if !namespace.is_empty() {
        let (_, rbs) = store.list(&store_name("rolebindings"), Some(namespace));
        bindings.extend(rbs.into_iter().map(|b| ("RoleBinding", b)));
    }
    for (kind, obj) in bindings {
        let Ok(b) = Binding::deserialize(&*obj) else {
            continue;
        };
        let ns = if kind == "RoleBinding" { namespace } else { "" };
        if !b
            .subjects
            .iter()
            .flatten()
            .any(|s| subject_matches(s, ns, user))
        {
            continue;
        }
        let (plural, role_ns) = match b.role_ref.kind.as_str() {
            "Role" if kind == "RoleBinding" => ("roles", namespace),
            "ClusterRole" => ("clusterroles", ""),
            _ => continue,
        };
        let Some(role) = store.get(&store_name(plural), role_ns, &b.role_ref.name) else {
            errors.push(format!(
                "{}.{GROUP} \"{}\" not found",
                b.role_ref.kind.to_ascii_lowercase(),
                b.role_ref.name
            ));
            continue;
        };
        let rules = rules_of(store, &role, &mut vec![b.role_ref.name.clone()]);
        out.push(Grant {
            binding_kind: kind,
            binding: name_of(&obj).to_string(),
            namespace: ns.to_string(),
            role_kind: b.role_ref.kind.clone(),
            role: b.role_ref.name.clone(),
            rules,
        });
    }
    (out, errors)
}

fn subject_words(user: &User) -> String {
    match service_account_of(&user.name) {
        Some((ns, name)) => format!("ServiceAccount \"{name}/{ns}\""),
        None => format!("User \"{}\"", user.name),
    }
}

/// The RBAC authorizer's decision.
pub fn decide(store: &Store, user: &User, req: &Request<'_>) -> Decision {
    if user.groups.iter().any(|g| g == MASTERS) {
        return Decision::Allow(format!("RBAC: allowed to the {MASTERS} group"));
    }
    let namespace = match req {
        Request::Resource(a) => a.namespace,
        Request::Path { .. } => "",
    };
    let (grants, errors) = grants(store, user, namespace);
    for g in &grants {
        if g.rules.iter().any(|r| rule_allows(r, req)) {
            let scope = if g.namespace.is_empty() {
                String::new()
            } else {
                format!(" in namespace \"{}\"", g.namespace)
            };
            return Decision::Allow(format!(
                "RBAC: allowed by {} \"{}\" of {} \"{}\" to {}{scope}",
                g.binding_kind,
                g.binding,
                g.role_kind,
                g.role,
                subject_words(user)
            ));
        }
    }
    let reason = match errors.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", errors[0]),
        _ => format!("RBAC: [{}]", errors.join(", ")),
    };
    Decision::NoOpinion(reason)
}

#[cfg(test)]
mod tests;
