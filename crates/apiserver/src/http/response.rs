//! Answers: JSON and Status bodies, one object or a list in the format the client asked for.

use crate::errors::ApiError;
use crate::http::call::Call;
use crate::kinds::convert;
use crate::registry::ResourceDef;
use crate::wire::request::{self, Format};
use crate::wire::table;
use axum::body::Body;
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;

/// A JSON answer.
pub fn json_response(code: u16, v: &Value) -> Response {
    json_response_typed(code, v, "application/json")
}

/// A JSON answer with a specific Content-Type.
pub fn json_response_typed(code: u16, v: &Value, content_type: &str) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    Response::builder()
        .status(code)
        .header("content-type", content_type)
        .header("cache-control", "no-cache, private")
        .body(Body::from(body))
        .unwrap_or_default()
}

/// A Status answer for an error.
pub fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.status_json())
}

pub(crate) fn text(code: u16, body: String, content_type: &str) -> Response {
    Response::builder()
        .status(code)
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap_or_default()
}

/// One object, rendered as JSON, partial metadata or a table row.
pub(crate) fn render_one(def: &ResourceDef, c: &Call, obj: &Value, rv: u64, code: u16) -> Response {
    let obj = &*convert::from_storage(def, obj);
    match request::format(&c.accept, c.q("includeObject")) {
        Format::Json => json_response(code, obj),
        Format::Partial => json_response(code, &table::partial_metadata(obj)),
        Format::Table(inc) => {
            json_response(code, &table::table(def.printer, &[obj], rv, inc, true))
        }
    }
}

/// A collection, rendered as a list, partial metadata list or table.
pub(crate) fn list_response(
    def: &ResourceDef,
    c: &Call,
    rv: u64,
    items: &[Arc<Value>],
    more: Option<&(String, u64)>,
) -> Response {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some((token, remaining)) = more {
        meta["continue"] = json!(token);
        meta["remainingItemCount"] = json!(remaining);
    }
    let items: Vec<std::borrow::Cow<'_, Value>> = items
        .iter()
        .map(|o| convert::from_storage(def, o))
        .collect();
    match request::format(&c.accept, c.q("includeObject")) {
        Format::Table(inc) => {
            let refs: Vec<&Value> = items.iter().map(|a| a.as_ref()).collect();
            let mut t = table::table(def.printer, &refs, rv, inc, true);
            // kubectl reads a long table in chunks too.
            t["metadata"] = meta;
            json_response(200, &t)
        }
        Format::Partial => json_response(
            200,
            &json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
                "items": items.iter().map(|o| table::partial_metadata(o)).collect::<Vec<_>>(),
            }),
        ),
        Format::Json => json_response(
            200,
            &json!({
                "kind": format!("{}List", def.kind),
                "apiVersion": def.api_version(),
                "metadata": meta,
                "items": items.iter().map(|o| o.as_ref()).collect::<Vec<_>>(),
            }),
        ),
    }
}
