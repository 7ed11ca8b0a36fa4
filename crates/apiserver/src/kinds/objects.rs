//! Server-side object rules shared by create, update and patch: defaulting on create, the
//! status-subresource split, immutable metadata, generation, and the gate/validation pass.

use crate::errors::ApiError;
use crate::kinds::gate::{self, FeatureGates};
use crate::kinds::validation;
use crate::registry::{Printer, ResourceDef};
use serde_json::{Map, Value, json};

/// Now, as the RFC 3339 second-precision timestamp Kubernetes uses.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A random RFC 4122 version-4 UID.
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    let mut b = b;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The metadata map of an object, created when missing.
pub fn metadata_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the object must be a JSON object"))?;
    let m = o.entry("metadata").or_insert_with(|| json!({}));
    if m.is_null() {
        *m = json!({});
    }
    m.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

/// The fields kube-apiserver decodes as strings: anything else in them fails decoding (400),
/// rather than being ignored or overwritten.
const STRING_FIELDS: &[&str] = &[
    "/apiVersion",
    "/kind",
    "/metadata/name",
    "/metadata/generateName",
    "/metadata/namespace",
    "/metadata/resourceVersion",
    "/metadata/uid",
    "/metadata/selfLink",
];

/// 400 when a field decoded as a string holds another JSON type (null counts as absent).
pub fn check_string_fields(obj: &Value) -> Result<(), ApiError> {
    for ptr in STRING_FIELDS {
        match obj.pointer(ptr) {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(other) => {
                let field = ptr.trim_start_matches('/').replace('/', ".");
                return Err(ApiError::bad_request(format!(
                    "{field}: Invalid value: {other}: must be a string"
                )));
            }
        }
    }
    Ok(())
}

/// Checks `kind`/`apiVersion` of a body against the resource, filling them when absent.
pub fn check_type(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    check_string_fields(obj)?;
    let Some(o) = obj.as_object_mut() else {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    };
    let av = def.api_version();
    match o.get("apiVersion").and_then(Value::as_str) {
        Some(v) if !v.is_empty() && v != av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({av})"
            )));
        }
        _ => {}
    }
    match o.get("kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() && k != def.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )));
        }
        _ => {}
    }
    o.insert("apiVersion".into(), Value::String(av));
    o.insert("kind".into(), Value::String(def.kind.into()));
    Ok(())
}

/// Fills server-set fields on create; `ns` is the request's namespace.
pub fn prepare_create(def: &ResourceDef, obj: &mut Value, ns: &str) -> Result<String, ApiError> {
    check_type(def, obj)?;
    let m = metadata_mut(obj)?;
    if def.namespaced {
        match m.get("namespace").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {}
        }
        m.insert("namespace".into(), json!(ns));
    } else {
        m.remove("namespace");
    }
    let mut name = m
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name.is_empty()
        && let Some(g) = m
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
    {
        name = format!("{g}{}", random_suffix());
        m.insert("name".into(), json!(name));
    }
    m.insert("uid".into(), json!(new_uid()));
    m.insert("creationTimestamp".into(), json!(now_rfc3339()));
    m.remove("resourceVersion");
    m.remove("deletionTimestamp");
    m.remove("deletionGracePeriodSeconds");
    m.remove("managedFields");
    m.remove("selfLink");
    if !matches!(
        def.printer,
        Printer::Event | Printer::EventV1 | Printer::Lease | Printer::Secret
    ) {
        m.insert("generation".into(), json!(1));
    }
    apply_defaults(def, obj);
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the object must be a JSON object"))?;
    match def.printer {
        Printer::Pod => {
            let mut status = json!({"phase": "Pending"});
            if let Some(qos) = o.get("status").and_then(|s| s.get("qosClass")).cloned() {
                status["qosClass"] = qos;
            }
            o.insert("status".into(), status);
        }
        Printer::Pvc | Printer::Pv => {
            o.insert("status".into(), json!({"phase": "Pending"}));
        }
        // Status is written through /status only; a create starts without one.
        Printer::CsiNode | Printer::VolumeAttachment => {
            o.remove("status");
        }
        Printer::Namespace => {
            o.insert("status".into(), json!({"phase": "Active"}));
            let spec = o.entry("spec").or_insert_with(|| json!({}));
            if spec.get("finalizers").is_none() && spec.is_object() {
                spec["finalizers"] = json!(["kubernetes"]);
            }
        }
        _ => {}
    }
    Ok(name)
}

/// Sets the defaults the real server's defaulting sets for fields `kubectl get` prints.
fn apply_defaults(def: &ResourceDef, obj: &mut Value) {
    let defaults = match def.printer {
        Printer::Pvc => json!({"spec": {"volumeMode": "Filesystem"}}),
        Printer::Pv => {
            json!({"spec": {"persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"}})
        }
        Printer::StorageClass => {
            json!({"reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
        }
        Printer::CsiDriver => json!({"spec": {"attachRequired": true, "podInfoOnMount": false,
            "requiresRepublish": false, "storageCapacity": false, "volumeLifecycleModes": ["Persistent"],
            "fsGroupPolicy": "ReadWriteOnceWithFSType"}}),
        Printer::Pod => {
            json!({"spec": {"restartPolicy": "Always", "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst"}})
        }
        _ => return,
    };
    fill_missing(obj, &defaults);
}

fn fill_missing(target: &mut Value, defaults: &Value) {
    let (Some(t), Some(d)) = (target.as_object_mut(), defaults.as_object()) else {
        return;
    };
    for (k, v) in d {
        match t.get_mut(k) {
            None | Some(Value::Null) => {
                t.insert(k.clone(), v.clone());
            }
            Some(existing) => {
                if v.is_object() {
                    fill_missing(existing, v);
                }
            }
        }
    }
}

fn without(obj: &Value, keys: &[&str]) -> Value {
    match obj {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !keys.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Builds the object to store from the stored `old` and the client's `proposed` state, applying
/// the status rule for `status_only` (the /status subresource) or the main resource.
pub fn merge_update(
    def: &ResourceDef,
    old: &Value,
    mut proposed: Value,
    status_only: bool,
) -> Result<Value, ApiError> {
    check_type(def, &mut proposed)?;
    let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut new = if status_only {
        let mut n = old.clone();
        match proposed.get("status") {
            Some(s) if !s.is_null() => n["status"] = s.clone(),
            _ => {
                if let Some(o) = n.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        n
    } else {
        let mut n = proposed;
        if def.has_status
            && let Some(o) = n.as_object_mut()
        {
            match old.get("status") {
                Some(s) => o.insert("status".into(), s.clone()),
                None => o.remove("status"),
            };
        }
        n
    };
    {
        let m = metadata_mut(&mut new)?;
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
        ] {
            match old_meta.get(k) {
                Some(v) => m.insert(k.into(), v.clone()),
                None => m.remove(k),
            };
        }
        m.remove("selfLink");
    }
    if !status_only
        && old
            .get("metadata")
            .and_then(|m| m.get("generation"))
            .is_some()
    {
        let skip = ["metadata", "status"];
        if without(old, &skip) != without(&new, &skip) {
            let g = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                + 1;
            metadata_mut(&mut new)?.insert("generation".into(), json!(g));
        }
    }
    Ok(new)
}

/// The resourceVersion carried by an object, if non-empty.
pub fn resource_version(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Whether `new` differs from `old` in anything but the resourceVersion.
pub fn changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        v
    };
    strip(old) != strip(new)
}

/// The gate and validation pass run before every save.
pub fn admit(
    gates: FeatureGates,
    def: &ResourceDef,
    old: Option<&Value>,
    new: &mut Value,
) -> Result<(), ApiError> {
    if def.printer == Printer::Secret {
        crate::kinds::secrets::normalize(old, new)?;
    }
    gate::drop_disabled_fields(gates, def, old, new);
    if let Some(old) = old {
        crate::kinds::rbac_objects::check_update(def, old, new)?;
    }
    validation::validate(def, new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_rule_both_ways() {
        let def = crate::registry::find("", "v1", "persistentvolumeclaims").unwrap();
        let old = json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1", "metadata": {"name": "d", "uid": "u", "generation": 1},
            "spec": {"volumeName": "a"}, "status": {"phase": "Bound"}});
        let main = merge_update(def, &old, json!({"metadata": {"name": "d", "uid": "x"}, "spec": {"volumeName": "b"}, "status": {"phase": "Lost"}}), false).unwrap();
        assert_eq!(main["status"]["phase"], "Bound");
        assert_eq!(main["spec"]["volumeName"], "b");
        assert_eq!(main["metadata"]["uid"], "u");
        assert_eq!(main["metadata"]["generation"], 2);
        let st = merge_update(def, &old, json!({"metadata": {"name": "d"}, "spec": {"volumeName": "c"}, "status": {"phase": "Lost"}}), true).unwrap();
        assert_eq!(st["status"]["phase"], "Lost");
        assert_eq!(st["spec"]["volumeName"], "a");
        assert_eq!(new_uid().len(), 36);
    }
}
