//! Deletion: preconditions, finalizers (terminate instead of delete), namespace contents, and
//! deletecollection.

use crate::errors::ApiError;
use crate::http::call::Call;
use crate::http::response::{json_response, list_response, render_one};
use crate::http::state::AppState;
use crate::kinds::names::name_of;
use crate::kinds::objects;
use crate::kinds::patch;
use crate::registry::{self, ResourceDef};
use crate::storage::store::Outcome;
use crate::verbs::query::select;
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::{Value, json};
use std::sync::Arc;

pub(crate) fn delete_one(
    st: &AppState,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    opts: &Value,
) -> Result<Option<Arc<Value>>, ApiError> {
    if def.plural == "namespaces" && def.group.is_empty() {
        if matches!(name, "default" | "kube-system" | "kube-public") {
            return Err(ApiError::forbidden(
                "",
                "namespaces",
                name,
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
            ));
        }
        if st.store.get(&def.store_name(), "", name).is_some() {
            for r in registry::RESOURCES.iter().filter(|r| r.namespaced) {
                let (_, items) = st.store.list(&r.store_name(), Some(name));
                for o in items {
                    let n = name_of(&o).to_string();
                    st.store
                        .mutate(&r.store_name(), name, &n, |_| Ok(Outcome::Delete))?;
                }
            }
        }
    }
    let pre_rv = opts
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_string);
    let pre_uid = opts
        .pointer("/preconditions/uid")
        .and_then(Value::as_str)
        .map(str::to_string);
    let w = st.store.mutate(&def.store_name(), ns, name, |old| {
        let old = old.ok_or_else(|| ApiError::not_found(def.group, def.plural, name))?;
        if pre_rv
            .as_deref()
            .is_some_and(|rv| Some(rv) != objects::resource_version(old))
            || pre_uid
                .as_deref()
                .is_some_and(|u| Some(u) != old.pointer("/metadata/uid").and_then(Value::as_str))
        {
            return Err(ApiError::conflict(def.group, def.plural, name));
        }
        let has_finalizers = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Outcome::Unchanged);
            }
            let mut new = old.clone();
            let m = objects::metadata_mut(&mut new)?;
            m.insert("deletionTimestamp".into(), json!(objects::now_rfc3339()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            return Ok(Outcome::Put(new));
        }
        Ok(Outcome::Delete)
    })?;
    Ok(w.new.or(w.deleted))
}

/// 400 for a propagation policy that does not exist.
fn check_policy(p: &str) -> Result<(), ApiError> {
    if matches!(p, "Orphan" | "Background" | "Foreground") {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Background\", \"Foreground\", \"Orphan\""
    )))
}

/// 422 for a negative grace period: "now" is 0, and a negative one means nothing.
fn check_grace(seconds: i64) -> Result<(), ApiError> {
    if seconds >= 0 {
        return Ok(());
    }
    Err(ApiError::new(
        422,
        "Invalid",
        format!("gracePeriodSeconds: Invalid value: {seconds}: must be greater than or equal to 0"),
    ))
}

/// The DeleteOptions a DELETE carries in its query (`gracePeriodSeconds`, `propagationPolicy`),
/// refused as kube-apiserver refuses them rather than ignored.
fn query_options(c: &Call) -> Result<(), ApiError> {
    if let Some(g) = c.q("gracePeriodSeconds") {
        let seconds = g.parse::<i64>().map_err(|_| {
            ApiError::bad_request(format!(
                "gracePeriodSeconds: Invalid value: \"{g}\": must be an integer"
            ))
        })?;
        check_grace(seconds)?;
    }
    if let Some(p) = c.q("propagationPolicy") {
        check_policy(p)?;
    }
    Ok(())
}

/// The body of a DELETE, which must decode as `DeleteOptions` (400 otherwise: a precondition
/// of the wrong type must not be ignored), and the options of its query.
fn delete_options(c: &Call) -> Result<Value, ApiError> {
    query_options(c)?;
    if c.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    let opts = patch::parse_json(&c.body)?;
    let decoded: DeleteOptions = serde_json::from_value(opts.clone())
        .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
    if let Some(p) = decoded.propagation_policy.as_deref() {
        check_policy(p)?;
    }
    if let Some(g) = decoded.grace_period_seconds {
        check_grace(g)?;
    }
    if let Some(d) = decoded.dry_run.iter().flatten().find(|d| *d != "All") {
        return Err(ApiError::bad_request(format!(
            "Invalid value: \"{d}\": dryRun: supported values: \"All\""
        )));
    }
    Ok(opts)
}

/// DELETE of one object: finalizers make it terminate instead; namespaces take their contents along.
pub fn delete(st: &AppState, c: &Call) -> Result<Response, ApiError> {
    let def = c.target.def;
    let opts = delete_options(c)?;
    if c.dry_run() {
        let obj = st
            .store
            .get(&c.res(), &c.target.ns, c.name())
            .ok_or_else(|| ApiError::not_found(def.group, def.plural, c.name()))?;
        return Ok(json_response(200, &obj));
    }
    let obj = delete_one(st, def, &c.target.ns, c.name(), &opts)?
        .ok_or_else(|| ApiError::not_found(def.group, def.plural, c.name()))?;
    Ok(render_one(def, c, &obj, st.store.current_rv(), 200))
}

/// DELETE of a collection, honouring selectors.
pub fn delete_collection(st: &AppState, c: &Call) -> Result<Response, ApiError> {
    let def = c.target.def;
    let opts = delete_options(c)?;
    let (_, items) = select(st, &c.target, &c.query)?;
    let mut deleted = Vec::new();
    for o in items {
        let ns = o
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = name_of(&o).to_string();
        if c.dry_run() {
            deleted.push(o);
            continue;
        }
        match delete_one(st, def, &ns, &name, &opts) {
            Ok(Some(d)) => deleted.push(d),
            Ok(None) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(list_response(def, c, st.store.current_rv(), &deleted, None))
}
