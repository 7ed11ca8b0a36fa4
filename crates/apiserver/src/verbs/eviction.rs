//! The `pods/eviction` subresource: a `policy/v1` Eviction deletes its pod unless a
//! PodDisruptionBudget selecting the pod allows no disruption, which is answered 429 with a
//! Status. A budget's `disruptionsAllowed` is computed from its `minAvailable` or
//! `maxUnavailable` (integer or percent) and the ready pods it selects, and written to its status.

use crate::errors::ApiError;
use crate::http::call::Call;
use crate::http::response::json_response;
use crate::http::state::AppState;
use crate::kinds::names::name_of;
use crate::registry;
use crate::storage::store::Outcome;
use axum::response::Response;
use serde_json::{Value, json};

/// Whether `selector` (a structured LabelSelector) selects `labels`; an empty one selects all.
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let ok_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let ok_exprs = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|es| {
            es.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str) {
                    Some("In") => label(key).is_some_and(|l| values.contains(&l)),
                    Some("NotIn") => label(key).is_none_or(|l| !values.contains(&l)),
                    Some("Exists") => label(key).is_some(),
                    Some("DoesNotExist") => label(key).is_none(),
                    _ => false,
                }
            })
        });
    ok_labels && ok_exprs
}

fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// An IntOrString of a budget resolved against `of` pods (percentages round up, as upstream).
fn resolve(v: &Value, of: i64) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let p: f64 = v.as_str()?.strip_suffix('%')?.parse().ok()?;
    Some((p * of as f64 / 100.0).ceil() as i64)
}

/// A budget's status for the `pods` of its namespace.
pub fn status(pdb: &Value, pods: &[std::sync::Arc<Value>]) -> Value {
    let selector = pdb.pointer("/spec/selector").cloned().unwrap_or(json!({}));
    let selected: Vec<&Value> = pods
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .filter(|p| {
            selects(
                &selector,
                p.pointer("/metadata/labels").unwrap_or(&json!({})),
            )
        })
        .collect();
    let expected = selected.len() as i64;
    let healthy = selected.iter().filter(|p| ready(p)).count() as i64;
    let desired = if let Some(min) = pdb.pointer("/spec/minAvailable") {
        resolve(min, expected).unwrap_or(expected)
    } else if let Some(max) = pdb.pointer("/spec/maxUnavailable") {
        expected - resolve(max, expected).unwrap_or(0)
    } else {
        expected
    };
    json!({
        "observedGeneration": pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "expectedPods": expected,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": (healthy - desired).max(0),
    })
}

fn too_many_requests(pdb: &str) -> ApiError {
    ApiError {
        code: 429,
        reason: "TooManyRequests",
        message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
        details: Some(json!({"causes": [{
            "reason": "DisruptionBudget",
            "message": format!("The disruption budget {pdb} needs more healthy pods and has no disruption allowed"),
        }]})),
    }
}

/// POST `pods/NAME/eviction`.
pub fn create(st: &AppState, c: &Call) -> Result<Response, ApiError> {
    let ns = c.target.ns.as_str();
    let name = c.name();
    let body: Value = crate::http::body::parse_body(c)?;
    if body
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k != "Eviction")
    {
        return Err(ApiError::bad_request(
            "the body of an eviction must be an Eviction",
        ));
    }
    let pods_def = c.target.def;
    let pod = st
        .store
        .get(&pods_def.store_name(), ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let pdb_def = registry::find("policy", "v1", "poddisruptionbudgets")
        .ok_or_else(|| ApiError::internal("poddisruptionbudgets not registered"))?;
    let (_, pods) = st.store.list(&pods_def.store_name(), Some(ns));
    let (_, pdbs) = st.store.list(&pdb_def.store_name(), Some(ns));
    let labels = pod
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    let terminal = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    for pdb in &pdbs {
        let selector = pdb.pointer("/spec/selector").cloned().unwrap_or(json!({}));
        if !selects(&selector, &labels) {
            continue;
        }
        let pdb_name = name_of(pdb).to_string();
        let mut s = status(pdb, &pods);
        // An unready or finished pod counts for no budget: evicting it disrupts nothing.
        let allowed = s["disruptionsAllowed"].as_i64().unwrap_or(0);
        if allowed <= 0 && ready(&pod) && !terminal {
            write_status(st, &pdb_def.store_name(), ns, &pdb_name, s)?;
            return Err(too_many_requests(&pdb_name));
        }
        if ready(&pod) {
            s["disruptionsAllowed"] = json!((allowed - 1).max(0));
        }
        write_status(st, &pdb_def.store_name(), ns, &pdb_name, s)?;
    }
    if !c.dry_run() {
        crate::verbs::deletion::delete_one(st, pods_def, ns, name, &json!({}))?;
    }
    Ok(json_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
    ))
}

fn write_status(
    st: &AppState,
    store: &str,
    ns: &str,
    name: &str,
    status: Value,
) -> Result<(), ApiError> {
    st.store.mutate(store, ns, name, |old| {
        let Some(old) = old else {
            return Ok(Outcome::Unchanged);
        };
        if old.get("status") == Some(&status) {
            return Ok(Outcome::Unchanged);
        }
        let mut new = old.clone();
        new["status"] = status.clone();
        Ok(Outcome::Put(new))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_and_budgets() {
        let labels = json!({"app": "db", "tier": "x"});
        assert!(selects(&json!({}), &labels));
        assert!(selects(&json!({"matchLabels": {"app": "db"}}), &labels));
        assert!(!selects(&json!({"matchLabels": {"app": "web"}}), &labels));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x", "y"]}]}),
            &labels
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}),
            &labels
        ));
        let pod = |ready: bool| {
            std::sync::Arc::new(json!({"metadata": {"labels": {"app": "db"}},
                "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}}))
        };
        let pods = vec![pod(true), pod(true), pod(false)];
        let min = json!({"spec": {"selector": {"matchLabels": {"app": "db"}}, "minAvailable": 2}});
        let s = status(&min, &pods);
        assert_eq!(
            (
                s["expectedPods"].as_i64(),
                s["currentHealthy"].as_i64(),
                s["disruptionsAllowed"].as_i64()
            ),
            (Some(3), Some(2), Some(0))
        );
        let max =
            json!({"spec": {"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": "34%"}});
        // 34% of 3 rounds up to 2 unavailable: desired 1, healthy 2, one disruption allowed.
        assert_eq!(status(&max, &pods)["disruptionsAllowed"], 1);
    }
}
