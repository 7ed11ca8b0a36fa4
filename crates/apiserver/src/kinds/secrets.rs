//! core/v1 Secret rules: `stringData` is write-only (merged into `data` base64-encoded, never
//! stored), `type` defaults to Opaque and is immutable, `immutable: true` freezes the data, and
//! which Secrets a node identity may read. Messages name keys only, never values.

use crate::errors::{ApiError, Cause};
use crate::kinds::names::name_of;
use serde_json::{Map, Value, json};

/// Largest total size of a Secret's data, in bytes (as the real server).
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// Keys each well-known Secret type must carry in `data`.
const REQUIRED_KEYS: &[(&str, &[&str])] = &[
    ("kubernetes.io/dockercfg", &[".dockercfg"]),
    ("kubernetes.io/dockerconfigjson", &[".dockerconfigjson"]),
    ("kubernetes.io/ssh-auth", &["ssh-privatekey"]),
    ("kubernetes.io/tls", &["tls.crt", "tls.key"]),
];

fn undecodable(why: String) -> ApiError {
    ApiError::bad_request(format!(
        "Secret in version \"v1\" cannot be handled as a Secret: {why}"
    ))
}

fn decode_value(key: &str, v: &Value) -> Result<Vec<u8>, ApiError> {
    // The serde error would quote the offending text, which is secret, so it is dropped.
    serde_json::from_value::<k8s_openapi::ByteString>(v.clone())
        .map(|b| b.0)
        .map_err(|_| undecodable(format!("illegal base64 data in data[{key:?}]")))
}

fn encode(bytes: Vec<u8>) -> Result<Value, ApiError> {
    serde_json::to_value(k8s_openapi::ByteString(bytes))
        .map_err(|e| ApiError::internal(format!("encoding Secret data: {e}")))
}

/// Folds `stringData` into `data` (base64), drops `stringData`, defaults `type`, and enforces
/// the update rules against `old`.
pub fn normalize(old: Option<&Value>, new: &mut Value) -> Result<(), ApiError> {
    let o = new
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the object must be a JSON object"))?;
    let string_data = match o.remove("stringData") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(undecodable("stringData must be an object".into())),
    };
    let mut data = match o.remove("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(undecodable("data must be an object".into())),
    };
    for (k, v) in &data {
        decode_value(k, v)?;
    }
    for (k, v) in string_data {
        let Value::String(s) = v else {
            return Err(undecodable(format!("stringData[{k:?}] must be a string")));
        };
        data.insert(k, encode(s.into_bytes())?);
    }
    if !data.is_empty() {
        o.insert("data".into(), Value::Object(data));
    }
    match o.get("type") {
        Some(Value::String(t)) if !t.is_empty() => {}
        _ => {
            o.insert("type".into(), json!("Opaque"));
        }
    }
    if let Some(old) = old {
        let mut causes = Vec::new();
        if old.get("type") != new.get("type") {
            causes.push(Cause::new(
                "FieldValueInvalid",
                "type",
                "Invalid value: field is immutable",
            ));
        }
        if old.get("immutable") == Some(&Value::Bool(true)) {
            if old.get("data") != new.get("data") {
                causes.push(Cause::new(
                    "FieldValueForbidden",
                    "data",
                    "Forbidden: field is immutable when `immutable` is set",
                ));
            }
            if new.get("immutable") != Some(&Value::Bool(true)) {
                causes.push(Cause::new(
                    "FieldValueForbidden",
                    "immutable",
                    "Forbidden: field is immutable when `immutable` is set",
                ));
            }
        }
        if !causes.is_empty() {
            let name = name_of(new);
            return Err(ApiError::invalid("", "Secret", name, causes));
        }
    }
    Ok(())
}

fn is_config_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k != "."
        && k != ".."
        && !k.starts_with("..")
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Checks the keys, the total size and the keys its type requires.
pub fn validate(secret: &k8s_openapi::api::core::v1::Secret, causes: &mut Vec<Cause>) {
    let data = secret.data.as_ref();
    let mut total = 0usize;
    for (k, v) in data.into_iter().flatten() {
        total += v.0.len();
        if !is_config_key(k) {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("data[{k}]"),
                format!("Invalid value: {k:?}: a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"),
            ));
        }
    }
    if total > MAX_SECRET_SIZE {
        causes.push(Cause::new(
            "FieldValueTooLong",
            "data",
            format!("Too long: must have at most {MAX_SECRET_SIZE} bytes"),
        ));
    }
    let ty = secret.type_.as_deref().unwrap_or("Opaque");
    for (t, keys) in REQUIRED_KEYS {
        if *t != ty {
            continue;
        }
        for key in *keys {
            if !data.is_some_and(|d| d.contains_key(*key)) {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    format!("data[{key}]"),
                    "Required value",
                ));
            }
        }
    }
}

fn names_at<'a>(v: &'a Value, list: &str, ptr: &str) -> impl Iterator<Item = &'a str> {
    v.get(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(move |e| e.pointer(ptr).and_then(Value::as_str))
}

/// Whether `pod` names Secret `name` in a volume, a projected volume, an inline CSI volume's
/// node secrets, a container's env or envFrom, or its imagePullSecrets: the relationship the
/// Node authorizer follows.
pub fn referenced_by_pod(pod: &Value, name: &str) -> bool {
    let Some(spec) = pod.get("spec") else {
        return false;
    };
    let mut refs: Vec<&str> = Vec::new();
    refs.extend(names_at(spec, "imagePullSecrets", "/name"));
    refs.extend(names_at(spec, "volumes", "/secret/secretName"));
    refs.extend(names_at(spec, "volumes", "/csi/nodePublishSecretRef/name"));
    for vol in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(sources) = vol.pointer("/projected/sources") {
            refs.extend(
                sources
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.pointer("/secret/name").and_then(Value::as_str)),
            );
        }
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            refs.extend(names_at(c, "env", "/valueFrom/secretKeyRef/name"));
            refs.extend(names_at(c, "envFrom", "/secretRef/name"));
        }
    }
    refs.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_merged_encoded_and_dropped() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"a": "YQ=="},
            "stringData": {"a": "over", "b": "bee"}});
        normalize(None, &mut s).unwrap();
        assert_eq!(s["data"], json!({"a": "b3Zlcg==", "b": "YmVl"}));
        assert!(s.get("stringData").is_none());
        assert_eq!(s["type"], "Opaque");
    }

    #[test]
    fn bad_base64_names_the_key_not_the_value() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"k": "not base64 hunter2!"}});
        let e = normalize(None, &mut s).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("data[\"k\"]"), "{}", e.message);
        assert!(!e.message.contains("hunter2"), "{}", e.message);
    }

    #[test]
    fn type_and_immutable_data_are_frozen() {
        let old = json!({"metadata": {"name": "s"}, "type": "Opaque", "immutable": true, "data": {"a": "YQ=="}});
        let mut changed = json!({"metadata": {"name": "s"}, "type": "x/y", "immutable": true, "data": {"a": "Yg=="}});
        let e = normalize(Some(&old), &mut changed).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains("type") && e.message.contains("data"),
            "{}",
            e.message
        );
        let mut same = old.clone();
        normalize(Some(&old), &mut same).unwrap();
    }

    #[test]
    fn keys_size_and_required_keys() {
        let bad: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
            "metadata": {"name": "s"}, "type": "kubernetes.io/tls",
            "data": {"bad key": "YQ==", "tls.crt": "YQ=="}}))
        .unwrap();
        let mut causes = Vec::new();
        validate(&bad, &mut causes);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["data[bad key]", "data[tls.key]"]);
    }

    #[test]
    fn pod_references() {
        let pod = json!({"spec": {
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [{"name": "v", "secret": {"secretName": "vol"}},
                        {"name": "p", "projected": {"sources": [{"secret": {"name": "proj"}}]}},
                        {"name": "c", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}}],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "envfrom"}}]}],
            "containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}}]}]}});
        for n in ["pull", "vol", "proj", "csi", "envfrom", "env"] {
            assert!(referenced_by_pod(&pod, n), "{n}");
        }
        assert!(!referenced_by_pod(&pod, "other"));
        assert!(!referenced_by_pod(&json!({}), "pull"));
    }
}
