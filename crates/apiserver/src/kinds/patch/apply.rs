//! Server-side apply, single-owner approximation: the applied configuration is merged like a
//! strategic merge patch, and whatever the same field manager applied last time but no longer
//! applies is removed. What each manager applied is kept in `metadata.managedFields` as a FieldsV1
//! set. Conflicts between managers are not detected.

use super::strategic;
use crate::errors::ApiError;
use crate::registry::ResourceDef;
use serde_json::{Map, Value, json};

/// Metadata fields the server owns; they never enter a field set.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
];

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The FieldsV1 set of an applied configuration.
pub fn field_set(def: &ResourceDef, applied: &Value) -> Value {
    object_set(def, "", applied)
}

fn object_set(def: &ResourceDef, path: &str, v: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(m) = v {
        for (k, val) in m {
            if path.is_empty() && (k == "apiVersion" || k == "kind") {
                continue;
            }
            if path == "metadata" && SERVER_METADATA.contains(&k.as_str()) {
                continue;
            }
            let p = child(path, k);
            out.insert(format!("f:{k}"), value_set(def, &p, val));
        }
    }
    Value::Object(out)
}

fn value_set(def: &ResourceDef, path: &str, v: &Value) -> Value {
    match v {
        Value::Object(_) => object_set(def, path, v),
        Value::Array(items) => match def.merge_key(path) {
            Some("") => Value::Object(
                items
                    .iter()
                    .map(|i| (format!("v:{i}"), json!({})))
                    .collect(),
            ),
            Some(key) => Value::Object(
                items
                    .iter()
                    .filter_map(|i| {
                        let id = i.get(key)?;
                        Some((
                            format!("k:{}", json!({ key: id })),
                            object_set(def, path, i),
                        ))
                    })
                    .collect(),
            ),
            None => json!({}),
        },
        _ => json!({}),
    }
}

/// Removes from `obj` what `old` names and `new` does not.
fn prune(obj: &mut Value, old: &Value, new: &Value) {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return;
    };
    for (entry, old_sub) in old {
        let new_sub = new.get(entry);
        if let Some(field) = entry.strip_prefix("f:") {
            let Some(m) = obj.as_object_mut() else {
                continue;
            };
            match new_sub {
                None => {
                    m.remove(field);
                }
                Some(ns) => {
                    if let Some(v) = m.get_mut(field) {
                        prune(v, old_sub, ns);
                    }
                }
            }
        } else if let Some(id) = entry.strip_prefix("k:") {
            let Ok(Value::Object(id)) = serde_json::from_str::<Value>(id) else {
                continue;
            };
            let Some(list) = obj.as_array_mut() else {
                continue;
            };
            let matches = |item: &Value| id.iter().all(|(k, v)| item.get(k) == Some(v));
            match new_sub {
                None => list.retain(|i| !matches(i)),
                Some(ns) => {
                    if let Some(item) = list.iter_mut().find(|i| matches(i)) {
                        prune(item, old_sub, ns);
                    }
                }
            }
        } else if let Some(raw) = entry.strip_prefix("v:")
            && new_sub.is_none()
            && let Ok(val) = serde_json::from_str::<Value>(raw)
            && let Some(list) = obj.as_array_mut()
        {
            list.retain(|i| *i != val);
        }
    }
}

fn entry_matches(e: &Value, manager: &str, subresource: &str) -> bool {
    e.get("manager").and_then(Value::as_str) == Some(manager)
        && e.get("operation").and_then(Value::as_str) == Some("Apply")
        && e.get("subresource").and_then(Value::as_str).unwrap_or("") == subresource
}

/// The field set `manager` applied last on `subresource` ("" for the main resource).
pub fn previous_set(obj: &Value, manager: &str, subresource: &str) -> Value {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|e| entry_matches(e, manager, subresource)))
        .and_then(|e| e.get("fieldsV1").cloned())
        .unwrap_or_else(|| json!({}))
}

/// Applies `applied` onto `current` for `manager`: prune what it no longer applies, then merge.
pub fn apply(
    def: &ResourceDef,
    current: &Value,
    applied: &Value,
    manager: &str,
    subresource: &str,
) -> Result<Value, ApiError> {
    let before = previous_set(current, manager, subresource);
    let after = field_set(def, applied);
    let mut base = current.clone();
    prune(&mut base, &before, &after);
    strategic::merge(def, &base, applied)
}

/// Records in `obj` the field set `manager` applied, replacing its earlier entry. Returns whether
/// the set differs from the earlier one.
pub fn record(
    def: &ResourceDef,
    obj: &mut Value,
    applied: &Value,
    manager: &str,
    subresource: &str,
    now: &str,
) -> bool {
    let set = field_set(def, applied);
    let changed = previous_set(obj, manager, subresource) != set;
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return changed;
    };
    let list = meta.entry("managedFields").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let Some(entries) = list.as_array_mut() else {
        return changed;
    };
    if !changed
        && entries
            .iter()
            .any(|e| entry_matches(e, manager, subresource))
    {
        return false;
    }
    entries.retain(|e| !entry_matches(e, manager, subresource));
    let mut e = json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": def.api_version(),
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": set,
    });
    if !subresource.is_empty() {
        e["subresource"] = json!(subresource);
    }
    entries.push(e);
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manager_removes_what_it_no_longer_applies() {
        let pods = crate::registry::find("", "v1", "pods").unwrap();
        let mut obj = json!({"metadata": {"name": "p", "labels": {"other": "x"}}, "status": {"phase": "Running"}});
        let first = json!({"status": {"volumeHealth": [
            {"name": "a", "healthConditions": [{"status": "Degraded", "reason": "R"}]},
            {"name": "b", "healthConditions": [{"status": "DataLoss", "reason": "S"}]}]}});
        obj = apply(pods, &obj, &first, "agent", "status").unwrap();
        assert!(record(pods, &mut obj, &first, "agent", "status", "t"));
        assert!(
            !record(pods, &mut obj, &first, "agent", "status", "t2"),
            "same set: no change"
        );
        let second = json!({"status": {"volumeHealth": [{"name": "a", "healthConditions": []}]}});
        let out = apply(pods, &obj, &second, "agent", "status").unwrap();
        assert_eq!(
            out["status"]["volumeHealth"],
            json!([{"name": "a", "healthConditions": []}])
        );
        assert_eq!(out["status"]["phase"], "Running", "fields of others stay");
        assert_eq!(out["metadata"]["labels"]["other"], "x");
    }
}
