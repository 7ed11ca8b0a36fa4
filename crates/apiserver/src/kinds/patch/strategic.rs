//! Strategic merge patch with the merge keys of the served kinds, including the `$patch`,
//! `$setElementOrder`, `$retainKeys` and `$deleteFromPrimitiveList` directives.

use crate::errors::ApiError;
use crate::registry::ResourceDef;
use serde_json::{Map, Value};

/// Applies a strategic merge `patch` to `original`.
pub fn merge(def: &ResourceDef, original: &Value, patch: &Value) -> Result<Value, ApiError> {
    let Some(root) = patch.as_object() else {
        return Err(ApiError::bad_request(
            "a strategic merge patch must be a JSON object",
        ));
    };
    if root.contains_key("$patch") {
        return Err(invalid(
            "a $patch directive may not apply to the whole object",
        ));
    }
    Ok(merge_value(def, "", Some(original.clone()), patch)?.unwrap_or(Value::Object(Map::new())))
}

/// 422 for a patch kube-apiserver cannot apply (it answers some of these with a 500).
fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(422, "Invalid", message)
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn without_directive(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "$patch")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_value(
    def: &ResourceDef,
    path: &str,
    orig: Option<Value>,
    patch: &Value,
) -> Result<Option<Value>, ApiError> {
    match patch {
        Value::Object(p) => merge_object(def, path, orig, p),
        Value::Array(items) => merge_list(def, path, orig, items).map(Some),
        other => Ok(Some(other.clone())),
    }
}

fn merge_object(
    def: &ResourceDef,
    path: &str,
    orig: Option<Value>,
    p: &Map<String, Value>,
) -> Result<Option<Value>, ApiError> {
    match p.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Ok(None),
        Some("replace") => {
            let mut m = p.clone();
            m.remove("$patch");
            return Ok(Some(Value::Object(m)));
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type: {other}"
            )));
        }
    }
    let mut result = match orig {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut orders: Vec<(&str, &Vec<Value>)> = Vec::new();
    let mut removals: Vec<(&str, &Vec<Value>)> = Vec::new();
    for (k, v) in p {
        if k == "$patch" || k == "$retainKeys" {
            continue;
        }
        if let Some(f) = k.strip_prefix("$setElementOrder/") {
            let key = def.merge_key(&child(path, f));
            orders.push((f, element_order(&child(path, k), v, key)?));
            continue;
        }
        if let Some(f) = k.strip_prefix("$deleteFromPrimitiveList/") {
            removals.push((f, primitive_list(&child(path, k), v)?));
            continue;
        }
        if k.starts_with('$') {
            return Err(ApiError::bad_request(format!(
                "unknown strategic merge directive: {k}"
            )));
        }
        if v.is_null() {
            result.remove(k);
            continue;
        }
        let merged = merge_value(def, &child(path, k), result.remove(k), v)?;
        if let Some(m) = merged {
            result.insert(k.clone(), m);
        }
    }
    for (f, vals) in removals {
        if let Some(Value::Array(a)) = result.get_mut(f) {
            a.retain(|x| !vals.contains(x));
        }
    }
    for (f, order) in orders {
        let key = def.merge_key(&child(path, f));
        if let Some(Value::Array(a)) = result.get_mut(f) {
            reorder(a, order, key);
        }
    }
    if let Some(keep) = p.get("$retainKeys") {
        let keep: Vec<&str> = match keep.as_array() {
            Some(a) if a.iter().all(Value::is_string) => {
                a.iter().filter_map(Value::as_str).collect()
            }
            _ => {
                return Err(invalid(format!(
                    "$retainKeys at {} must be a list of strings",
                    if path.is_empty() { "the root" } else { path }
                )));
            }
        };
        result.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(Some(Value::Object(result)))
}

/// The list of a `$setElementOrder` directive at `field`: entries of a keyed list must be
/// objects carrying the merge key, of a primitive list primitives (kube-apiserver refuses the
/// patch otherwise rather than ordering by nothing).
fn element_order<'a>(
    field: &str,
    v: &'a Value,
    key: Option<&str>,
) -> Result<&'a Vec<Value>, ApiError> {
    let Value::Array(entries) = v else {
        return Err(ApiError::bad_request(format!(
            "{field}: Invalid value: {v}: must be a list"
        )));
    };
    for (i, e) in entries.iter().enumerate() {
        let fits = match key {
            Some(k) if !k.is_empty() => e.as_object().is_some_and(|o| o.contains_key(k)),
            _ => is_primitive(e),
        };
        if !fits {
            let wanted = match key {
                Some(k) if !k.is_empty() => format!("an object with its merge key \"{k}\""),
                _ => "a primitive".to_string(),
            };
            return Err(invalid(format!(
                "{field}[{i}]: Invalid value: {e}: must be {wanted}"
            )));
        }
    }
    Ok(entries)
}

/// The list of a `$deleteFromPrimitiveList` directive at `field`, which must hold primitives.
fn primitive_list<'a>(field: &str, v: &'a Value) -> Result<&'a Vec<Value>, ApiError> {
    let Value::Array(entries) = v else {
        return Err(ApiError::bad_request(format!(
            "{field}: Invalid value: {v}: must be a list of primitives"
        )));
    };
    if let Some((i, e)) = entries.iter().enumerate().find(|(_, e)| !is_primitive(e)) {
        return Err(invalid(format!(
            "{field}[{i}]: Invalid value: {e}: must be a primitive"
        )));
    }
    Ok(entries)
}

fn is_primitive(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

fn identity<'a>(item: &'a Value, key: Option<&str>) -> Option<&'a Value> {
    match key {
        Some(k) if !k.is_empty() => item.get(k),
        _ => Some(item),
    }
}

fn reorder(list: &mut Vec<Value>, order: &[Value], key: Option<&str>) {
    let wanted: Vec<&Value> = order.iter().filter_map(|o| identity(o, key)).collect();
    let rank =
        |item: &Value| identity(item, key).and_then(|id| wanted.iter().position(|w| *w == id));
    let mut ranked: Vec<(usize, usize, Value)> = list
        .drain(..)
        .enumerate()
        .map(|(i, v)| (rank(&v).unwrap_or(usize::MAX), i, v))
        .collect();
    ranked.sort_by_key(|(r, i, _)| (*r, *i));
    list.extend(ranked.into_iter().map(|(_, _, v)| v));
}

fn merge_list(
    def: &ResourceDef,
    path: &str,
    orig: Option<Value>,
    patch: &[Value],
) -> Result<Value, ApiError> {
    let Some(key) = def.merge_key(path) else {
        return Ok(Value::Array(patch.iter().map(without_directive).collect()));
    };
    let is_replace = |v: &Value| v.get("$patch").and_then(Value::as_str) == Some("replace");
    if patch.iter().any(is_replace) {
        return Ok(Value::Array(
            patch.iter().filter(|v| !is_replace(v)).cloned().collect(),
        ));
    }
    let mut list = match orig {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    if key.is_empty() {
        for item in patch {
            if !list.contains(item) {
                list.push(item.clone());
            }
        }
        return Ok(Value::Array(list));
    }
    for item in patch {
        let Some(obj) = item.as_object() else {
            return Err(invalid(format!(
                "{path}: a list entry must be an object with its merge key \"{key}\""
            )));
        };
        let id = obj.get(key);
        if id.is_none() {
            return Err(invalid(format!(
                "{path}: map {} does not contain declared merge key: {key}",
                Value::Object(obj.clone())
            )));
        }
        let pos = id.and_then(|id| list.iter().position(|x| x.get(key) == Some(id)));
        if obj.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(id) = id {
                list.retain(|x| x.get(key) != Some(id));
            }
            continue;
        }
        match pos {
            Some(i) => {
                let current = list.remove(i);
                if let Some(m) = merge_object(def, path, Some(current), obj)? {
                    list.insert(i, m);
                }
            }
            None => {
                if let Some(m) = merge_object(def, path, None, obj)? {
                    list.push(m);
                }
            }
        }
    }
    Ok(Value::Array(list))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods() -> &'static ResourceDef {
        crate::registry::find("", "v1", "pods").unwrap()
    }

    #[test]
    fn keyed_lists_merge_and_delete() {
        let orig = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let patch = json!({"spec": {"$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"name": "a", "image": "alpine"}, {"$patch": "delete", "name": "b"}]}});
        let out = merge(pods(), &orig, &patch).unwrap();
        assert_eq!(
            out,
            json!({"spec": {"containers": [{"name": "a", "image": "alpine"}]}})
        );
    }

    #[test]
    fn volume_health_merges_by_name_and_conditions_replace() {
        let orig = json!({"status": {"volumeHealth": [
            {"name": "v1", "healthConditions": [{"status": "Degraded", "reason": "Slow"}]},
            {"name": "v2", "healthConditions": [{"status": "Inaccessible", "reason": "Gone"}]}]}});
        let patch = json!({"status": {"volumeHealth": [{"name": "v1", "healthConditions": [{"status": "DataLoss", "reason": "Bad"}]}]}});
        let out = merge(pods(), &orig, &patch).unwrap();
        assert_eq!(
            out["status"]["volumeHealth"][0]["healthConditions"],
            json!([{"status": "DataLoss", "reason": "Bad"}])
        );
        assert_eq!(out["status"]["volumeHealth"][1]["name"], "v2");
    }

    #[test]
    fn directives_replace_retain_and_primitive_delete() {
        let orig = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"x": 1, "y": 2, "volumes": [{"name": "v"}]}});
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"]},
            "spec": {"$retainKeys": ["x", "volumes"], "volumes": [{"$patch": "replace"}, {"name": "w"}]}});
        let out = merge(pods(), &orig, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
        assert_eq!(out["spec"], json!({"x": 1, "volumes": [{"name": "w"}]}));
        let replaced = merge(
            pods(),
            &orig,
            &json!({"spec": {"$patch": "replace", "z": 3}}),
        )
        .unwrap();
        assert_eq!(replaced["spec"], json!({"z": 3}));
    }
}
