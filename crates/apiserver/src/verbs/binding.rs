//! `POST /api/v1/namespaces/{ns}/pods/{name}/binding`: what kube-scheduler calls to put a pod on
//! a node. It sets `spec.nodeName` once; a pod already on a node is a conflict.

use crate::errors::ApiError;
use crate::http::call::Call;
use crate::http::response::json_response;
use crate::http::state::AppState;
use crate::storage::store::Outcome;
use axum::response::Response;
use serde_json::{Value, json};

/// Whether `c` is a pods/binding request.
pub(crate) fn is_binding(c: &Call) -> bool {
    c.target.sub.as_deref() == Some("binding")
}

/// Binds the pod of `c` to the node its Binding body names.
pub(crate) fn bind(st: &AppState, c: &Call, body: &Value) -> Result<Response, ApiError> {
    let name = c.name().to_string();
    let node = body
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request("a Binding needs target.name, the node"))?
        .to_string();
    if body
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k != "Node")
    {
        return Err(ApiError::bad_request("a Binding's target must be a Node"));
    }
    let uid = body
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(str::to_string);
    st.store.mutate(&c.res(), &c.target.ns, &name, |old| {
        let old = old.ok_or_else(|| ApiError::not_found("", "pods", &name))?;
        if uid
            .as_deref()
            .is_some_and(|u| old.pointer("/metadata/uid").and_then(Value::as_str) != Some(u))
        {
            return Err(ApiError::conflict("", "pods", &name));
        }
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::conflict("", "pods", &name));
        }
        match old.pointer("/spec/nodeName").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => Err(ApiError::conflict("", "pods", &name)),
            _ => {
                let mut new = old.clone();
                if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.insert("nodeName".into(), json!(node));
                }
                Ok(Outcome::Put(new))
            }
        }
    })?;
    Ok(json_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
    ))
}
