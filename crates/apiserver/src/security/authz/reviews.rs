//! The review resources, answered from the authorizer chain and never stored:
//! SelfSubjectReview (`kubectl auth whoami`), SelfSubjectAccessReview and SubjectAccessReview
//! (`kubectl auth can-i`), and SelfSubjectRulesReview (`kubectl auth can-i --list`).

use super::{Attributes, Authorizer, Binding, Decision, Mode, Request, User, rbac};
use crate::errors::{ApiError, Cause};
use crate::storage::store::Store;
use serde_json::{Map, Value, json};

/// A review's answer: the request object with `status` filled in, as kube-apiserver returns it.
fn answer(mut body: Value, status: Value) -> Value {
    if let Some(o) = body.as_object_mut() {
        let meta = o.entry("metadata").or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.entry("creationTimestamp").or_insert(Value::Null);
        }
        o.insert("status".into(), status);
    }
    body
}

fn user_info(user: &User) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    info
}

/// `POST /apis/authentication.k8s.io/v1/selfsubjectreviews`: who the caller is.
pub fn self_subject_review(user: &User, body: Value) -> Value {
    answer(body, json!({"userInfo": user_info(user)}))
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Decides the `spec` of an access review for `user`; 422 unless exactly one of
/// resourceAttributes and nonResourceAttributes is given.
fn access_status(
    authorizer: &Authorizer,
    store: &Store,
    user: &User,
    kind: &str,
    spec: &Value,
) -> Result<Value, ApiError> {
    let res = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let decision = match (res, non) {
        (Some(r), None) => {
            let a = Attributes {
                verb: str_at(r, "verb"),
                group: str_at(r, "group"),
                resource: str_at(r, "resource"),
                subresource: str_at(r, "subresource"),
                namespace: str_at(r, "namespace"),
                name: str_at(r, "name"),
            };
            authorizer.decide(store, user, &Request::Resource(a), Binding::Lookup(store))
        }
        (None, Some(n)) => {
            let req = Request::Path {
                verb: str_at(n, "verb"),
                path: str_at(n, "path"),
            };
            authorizer.decide(store, user, &req, Binding::Lookup(store))
        }
        _ => {
            return Err(ApiError::invalid(
                "authorization.k8s.io",
                kind,
                "",
                vec![Cause::new(
                    "FieldValueRequired",
                    "spec.resourceAttributes",
                    "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )],
            ));
        }
    };
    Ok(match decision {
        Decision::Allow(reason) => json!({"allowed": true, "reason": reason}),
        Decision::Deny(reason) => json!({"allowed": false, "denied": true, "reason": reason}),
        Decision::NoOpinion(reason) => json!({"allowed": false, "reason": reason}),
    })
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`: may the caller do this?
pub fn self_subject_access_review(
    authorizer: &Authorizer,
    store: &Store,
    user: &User,
    body: Value,
) -> Result<Value, ApiError> {
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let status = access_status(authorizer, store, user, "SelfSubjectAccessReview", &spec)?;
    Ok(answer(body, status))
}

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: may `spec.user` with
/// `spec.groups` do this? (422 without a user or groups.)
pub fn subject_access_review(
    authorizer: &Authorizer,
    store: &Store,
    body: Value,
) -> Result<Value, ApiError> {
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let groups = crate::wire::strings(spec.get("groups")).unwrap_or_default();
    let subject = User {
        name: str_at(&spec, "user").to_string(),
        uid: str_at(&spec, "uid").to_string(),
        groups,
    };
    if subject.name.is_empty() && subject.groups.is_empty() {
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "",
            vec![Cause::new(
                "FieldValueRequired",
                "spec.user",
                "Required value: at least one of user or group must be specified",
            )],
        ));
    }
    let status = access_status(authorizer, store, &subject, "SubjectAccessReview", &spec)?;
    Ok(answer(body, status))
}

fn list(v: &Option<Vec<String>>) -> Value {
    json!(v.clone().unwrap_or_default())
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`: what may the caller do in
/// `spec.namespace`? Node identities under the Node authorizer are not enumerable, as in
/// kube-apiserver: the answer is then marked incomplete.
pub fn self_subject_rules_review(
    authorizer: &Authorizer,
    store: &Store,
    user: &User,
    body: Value,
) -> Value {
    let namespace = body
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    let mut incomplete = false;
    let mut errors = Vec::new();
    for mode in authorizer.modes() {
        match mode {
            Mode::Node if user.node_name().is_some() => {
                incomplete = true;
                errors.push("node authorizer does not support user rule resolution".to_string());
            }
            Mode::Node | Mode::AlwaysDeny => {}
            Mode::AlwaysAllow => {
                resource_rules
                    .push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
                non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
            }
            Mode::Rbac => {
                let (grants, errs) = rbac::grants(store, user, &namespace);
                if !errs.is_empty() {
                    incomplete = true;
                    errors.extend(errs);
                }
                for rule in grants.iter().flat_map(|g| g.rules.iter()) {
                    if rule
                        .non_resource_urls
                        .as_ref()
                        .is_some_and(|u| !u.is_empty())
                    {
                        non_resource_rules.push(json!({
                            "verbs": rule.verbs,
                            "nonResourceURLs": list(&rule.non_resource_urls),
                        }));
                    } else {
                        let mut r = Map::new();
                        r.insert("verbs".into(), json!(rule.verbs));
                        r.insert("apiGroups".into(), list(&rule.api_groups));
                        r.insert("resources".into(), list(&rule.resources));
                        if rule.resource_names.as_ref().is_some_and(|n| !n.is_empty()) {
                            r.insert("resourceNames".into(), list(&rule.resource_names));
                        }
                        resource_rules.push(Value::Object(r));
                    }
                }
            }
        }
    }
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": incomplete,
    });
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    answer(body, status)
}
