//! Query parsing shared by list, watch and deletecollection: selectors, and the objects they pick.

use crate::errors::ApiError;
use crate::http::call::Verb;
use crate::http::state::AppState;
use crate::kinds::convert;
use crate::kinds::selectors::{FieldSelector, LabelSelector};
use crate::registry::ResourceDef;
use crate::wire::request::Target;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Selectors of a list, watch or deletecollection.
pub fn selectors(
    def: &ResourceDef,
    query: &HashMap<String, String>,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let label = LabelSelector::parse(query.get("labelSelector").map(String::as_str).unwrap_or(""))?;
    let field = FieldSelector::parse(
        query.get("fieldSelector").map(String::as_str).unwrap_or(""),
        def,
    )?;
    Ok((label, field))
}

/// The objects of a collection request that pass the selectors, with the list resourceVersion.
pub fn select(
    st: &AppState,
    t: &Target,
    query: &HashMap<String, String>,
) -> Result<(u64, Vec<Arc<Value>>), ApiError> {
    let (label, field) = selectors(t.def, query)?;
    let ns = (t.def.namespaced && !t.ns.is_empty()).then_some(t.ns.as_str());
    let (rv, items) = st.store.list(&t.def.store_name(), ns);
    Ok((
        rv,
        items
            .into_iter()
            .filter(|o| {
                let view = convert::from_storage(t.def, o);
                label.matches(&view) && field.matches(&view)
            })
            .collect(),
    ))
}

/// Refuses option values kube-apiserver refuses (400): `dryRun` other than `All`;
/// `resourceVersionMatch` other than `NotOlderThan`/`Exact`, on a list without a
/// `resourceVersion`, or on a watch other than a streaming list; a `timeoutSeconds` that is
/// not a whole number of seconds.
pub fn check_options(verb: Verb, query: &HashMap<String, String>) -> Result<(), ApiError> {
    let q = |k: &str| query.get(k).map(String::as_str);
    if let Some(d) = q("dryRun")
        && d != "All"
    {
        return Err(ApiError::bad_request(format!(
            "Invalid value: \"{d}\": dryRun: supported values: \"All\""
        )));
    }
    if let Some(m) = q("resourceVersionMatch").filter(|m| !m.is_empty())
        && matches!(verb, Verb::List | Verb::Watch)
    {
        if !matches!(m, "NotOlderThan" | "Exact") {
            return Err(ApiError::bad_request(format!(
                "resourceVersionMatch: Unsupported value: \"{m}\": supported values: \"Exact\", \"NotOlderThan\""
            )));
        }
        let rv = q("resourceVersion").unwrap_or("");
        let initial_events = crate::wire::request::parse_bool(q("sendInitialEvents"));
        if verb == Verb::Watch && !(initial_events && m == "NotOlderThan") {
            return Err(ApiError::bad_request(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if verb == Verb::List && rv.is_empty() {
            return Err(ApiError::bad_request(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if m == "Exact" && rv == "0" {
            return Err(ApiError::bad_request(
                "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if let Some(t) = q("timeoutSeconds")
        && t.parse::<u64>().is_err()
    {
        return Err(ApiError::bad_request(format!(
            "timeoutSeconds: Invalid value: \"{t}\": must be a non-negative whole number of seconds"
        )));
    }
    Ok(())
}
