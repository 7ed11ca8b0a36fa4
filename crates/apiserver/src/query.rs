//! Query parsing shared by list, watch and deletecollection: selectors, and the objects they pick.

use crate::convert;
use crate::errors::ApiError;
use crate::registry::ResourceDef;
use crate::request::Target;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::AppState;
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
