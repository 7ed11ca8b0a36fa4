//! Request bodies: JSON, YAML or protobuf by their Content-Type, read into JSON. A leaf module, so
//! that every handler (create, update, eviction) reads bodies the same way without importing
//! the others.

use crate::errors::ApiError;
use crate::http::call::Call;
use crate::kinds::patch;
use serde_json::Value;

/// The request body as JSON, from JSON, YAML or protobuf (by its Content-Type).
pub(crate) fn parse_body(c: &Call) -> Result<Value, ApiError> {
    let ct = c
        .content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match ct.as_str() {
        "" | "application/json" | "*/*" => patch::parse_json(&c.body),
        "application/yaml" | "application/x-yaml" | "text/yaml" => patch::parse_yaml(&c.body),
        _ if crate::wire::protobuf::is_protobuf(&ct) => {
            let def = c.target.def;
            crate::wire::protobuf::decode(def.group, def.kind, &c.body)
        }
        _ => Err(ApiError::unsupported_media(&c.content_type)),
    }
}
