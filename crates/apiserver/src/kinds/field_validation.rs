//! `fieldValidation`: fields of a create or update body, or of a patched object, that the kind
//! does not have. Found by
//! reading the body into the k8s-openapi type of the kind and comparing key sets. `Strict`
//! refuses them (400; kubectl asks for it by default), `Warn` (the server's default) keeps the request with a `Warning` header per
//! field, `Ignore` says nothing; in every mode they are pruned, never stored. A server-side
//! apply body is checked itself, before it is merged, so that its field set in `managedFields`
//! never names what was pruned.

use crate::errors::ApiError;
use crate::registry::ResourceDef;
use k8s_openapi::api::{coordination, core, events, rbac, storage};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The `fieldValidation` directive of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Refuse unknown fields.
    Strict,
    /// Warn about them.
    Warn,
    /// Drop them silently.
    Ignore,
}

impl Mode {
    /// Parses the query parameter (absent = Warn, as in kube-apiserver).
    pub fn parse(v: Option<&str>) -> Result<Mode, ApiError> {
        match v {
            None | Some("" | "Warn") => Ok(Mode::Warn),
            Some("Strict") => Ok(Mode::Strict),
            Some("Ignore") => Ok(Mode::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: invalid value {other:?}: must be one of Ignore, Warn, Strict"
            ))),
        }
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(v: &Value) -> Option<Value> {
    let t: T = serde_json::from_value(v.clone()).ok()?;
    serde_json::to_value(t).ok()
}

/// The body as the kind's type keeps it; None for kinds without a type or bodies the type
/// cannot read (validation answers those).
fn known(def: &ResourceDef, v: &Value) -> Option<Value> {
    match (def.group, def.kind) {
        ("", "Namespace") => round_trip::<core::v1::Namespace>(v),
        ("", "Node") => round_trip::<core::v1::Node>(v),
        ("", "Pod") => round_trip::<core::v1::Pod>(v),
        ("", "PersistentVolumeClaim") => round_trip::<core::v1::PersistentVolumeClaim>(v),
        ("", "PersistentVolume") => round_trip::<core::v1::PersistentVolume>(v),
        ("", "Secret") => round_trip::<core::v1::Secret>(v),
        ("", "ServiceAccount") => round_trip::<core::v1::ServiceAccount>(v),
        ("", "Event") => round_trip::<core::v1::Event>(v),
        ("events.k8s.io", "Event") => round_trip::<events::v1::Event>(v),
        ("storage.k8s.io", "CSINode") => round_trip::<storage::v1::CSINode>(v),
        ("storage.k8s.io", "CSIDriver") => round_trip::<storage::v1::CSIDriver>(v),
        ("storage.k8s.io", "StorageClass") => round_trip::<storage::v1::StorageClass>(v),
        ("storage.k8s.io", "VolumeAttachment") => round_trip::<storage::v1::VolumeAttachment>(v),
        ("coordination.k8s.io", "Lease") => round_trip::<coordination::v1::Lease>(v),
        ("policy", "PodDisruptionBudget") => {
            round_trip::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(v)
        }
        ("rbac.authorization.k8s.io", "Role") => round_trip::<rbac::v1::Role>(v),
        ("rbac.authorization.k8s.io", "ClusterRole") => round_trip::<rbac::v1::ClusterRole>(v),
        ("rbac.authorization.k8s.io", "RoleBinding") => round_trip::<rbac::v1::RoleBinding>(v),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            round_trip::<rbac::v1::ClusterRoleBinding>(v)
        }
        _ => None,
    }
}

/// Removes from `sent` the keys `kept` lacks, recording their dotted paths.
fn prune(sent: &mut Value, kept: &Value, path: &str, unknown: &mut Vec<String>) {
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => {
            s.retain(|key, v| {
                let keep = k.contains_key(key) || v.is_null();
                if !keep {
                    unknown.push(format!("{path}{key}"));
                }
                keep
            });
            for (key, v) in s.iter_mut() {
                if let Some(kv) = k.get(key) {
                    prune(v, kv, &format!("{path}{key}."), unknown);
                }
            }
        }
        (Value::Array(s), Value::Array(k)) if s.len() == k.len() => {
            let base = path.trim_end_matches('.');
            for (i, (sv, kv)) in s.iter_mut().zip(k).enumerate() {
                prune(sv, kv, &format!("{base}[{i}]."), unknown);
            }
        }
        _ => {}
    }
}

/// Prunes the fields of `obj` its kind lacks; their dotted paths (`spec.foo`,
/// `spec.containers[0].bar`). Kinds without a type, and bodies the type cannot read, keep all.
fn prune_unknown(def: &ResourceDef, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some(kept) = known(def, obj) {
        prune(obj, &kept, "", &mut unknown);
    }
    unknown
}

fn unknown_warnings(unknown: &[String]) -> Vec<String> {
    unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect()
}

/// Prunes the unknown fields of `obj` and answers what `mode` asks: an error (Strict) or the
/// warnings to send (Warn).
pub fn check(def: &ResourceDef, mode: Mode, obj: &mut Value) -> Result<Vec<String>, ApiError> {
    let unknown = prune_unknown(def, obj);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    match mode {
        Mode::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            unknown_warnings(&unknown).join(", ")
        ))),
        Mode::Warn => Ok(unknown_warnings(&unknown)),
        Mode::Ignore => Ok(Vec::new()),
    }
}

/// [`check`] for a server-side apply body, before anything is merged or recorded: what is pruned
/// here is neither stored nor named in `managedFields`. `duplicates` are the keys the YAML
/// repeated; `object` names the target (`namespace/name`) in a refusal, which reads as
/// kube-apiserver's.
pub fn check_apply(
    def: &ResourceDef,
    mode: Mode,
    applied: &mut Value,
    duplicates: &[String],
    object: &str,
) -> Result<Vec<String>, ApiError> {
    let unknown = prune_unknown(def, applied);
    match mode {
        Mode::Strict if !duplicates.is_empty() => {
            let list: Vec<String> = duplicates
                .iter()
                .map(|f| format!("duplicate field \"{f}\""))
                .collect();
            Err(ApiError::bad_request(format!(
                "error strict decoding YAML: {}",
                list.join(", ")
            )))
        }
        Mode::Strict if !unknown.is_empty() => {
            let errors: Vec<String> = unknown
                .iter()
                .map(|f| format!(".{f}: field not declared in schema"))
                .collect();
            let errors = match errors.as_slice() {
                [one] => one.clone(),
                many => format!("errors:\n  {}", many.join("\n  ")),
            };
            let group = def.group;
            Err(ApiError::bad_request(format!(
                "failed to create typed patch object ({object}; {group}/{}, Kind={}): {errors}",
                def.version, def.kind
            )))
        }
        Mode::Strict | Mode::Ignore => Ok(Vec::new()),
        Mode::Warn => Ok(duplicates
            .iter()
            .map(|f| format!("duplicate field \"{f}\""))
            .chain(unknown_warnings(&unknown))
            .collect()),
    }
}

/// Adds one `Warning: 299 - "..."` header per warning.
pub fn add_warnings(resp: &mut axum::response::Response, warnings: &[String]) {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pvc_def() -> &'static ResourceDef {
        crate::registry::find("", "v1", "persistentvolumeclaims").unwrap()
    }

    #[test]
    fn unknown_fields_are_pruned_and_named() {
        let mut obj = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "d", "bogus": 1},
            "spec": {"accessModes": ["ReadWriteOnce"], "foo": "x", "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"healthStatus": {"healthConditions": [{"status": "Degraded", "reason": "Slow", "extra": true}]}}});
        let w = check(pvc_def(), Mode::Warn, &mut obj).unwrap();
        assert_eq!(
            w,
            vec![
                "unknown field \"metadata.bogus\"".to_string(),
                "unknown field \"spec.foo\"".to_string(),
                "unknown field \"status.healthStatus.healthConditions[0].extra\"".to_string(),
            ]
        );
        assert!(obj["spec"].get("foo").is_none());
        assert_eq!(obj["spec"]["resources"]["requests"]["storage"], "1Gi");
        let mut obj = json!({"metadata": {"name": "d"}, "spec": {"foo": 1}});
        let e = check(pvc_def(), Mode::Strict, &mut obj).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains("unknown field \"spec.foo\""),
            "{}",
            e.message
        );
        let mut obj = json!({"metadata": {"name": "d"}, "spec": {"foo": 1}});
        assert!(check(pvc_def(), Mode::Ignore, &mut obj).unwrap().is_empty());
        assert_eq!(obj, json!({"metadata": {"name": "d"}, "spec": {}}));
        assert!(Mode::parse(Some("Loose")).is_err());
    }

    #[test]
    fn an_apply_body_is_refused_as_kube_apiserver_words_it_or_pruned() {
        let body = json!({"metadata": {"name": "d"}, "spec": {"foo": 1, "volumeName": "v"}});
        let mut a = body.clone();
        let e = check_apply(pvc_def(), Mode::Strict, &mut a, &[], "ns/d").unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "failed to create typed patch object (ns/d; /v1, Kind=PersistentVolumeClaim): \
             .spec.foo: field not declared in schema"
        );
        let mut a = json!({"spec": {"foo": 1, "bar": 2}});
        let e = check_apply(pvc_def(), Mode::Strict, &mut a, &[], "ns/d").unwrap_err();
        assert!(e.message.ends_with("): errors:\n  .spec.bar: field not declared in schema\n  .spec.foo: field not declared in schema"), "{}", e.message);
        let dups = ["spec.volumeName".to_string()];
        let mut a = body.clone();
        let e = check_apply(pvc_def(), Mode::Strict, &mut a, &dups, "ns/d").unwrap_err();
        assert!(
            e.message.contains("duplicate field \"spec.volumeName\""),
            "{}",
            e.message
        );
        let mut a = body.clone();
        let w = check_apply(pvc_def(), Mode::Warn, &mut a, &dups, "ns/d").unwrap();
        assert_eq!(
            w,
            vec![
                "duplicate field \"spec.volumeName\"".to_string(),
                "unknown field \"spec.foo\"".to_string()
            ]
        );
        let pruned = json!({"metadata": {"name": "d"}, "spec": {"volumeName": "v"}});
        assert_eq!(a, pruned);
        let mut a = body;
        assert!(
            check_apply(pvc_def(), Mode::Ignore, &mut a, &dups, "ns/d")
                .unwrap()
                .is_empty()
        );
        assert_eq!(a, pruned);
    }
}
