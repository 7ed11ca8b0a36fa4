//! The four patch types real clients send: JSON patch, merge patch, strategic merge patch and
//! server-side apply.

pub mod apply;
pub mod strategic;
mod yaml;

use crate::errors::ApiError;
use crate::registry::ResourceDef;
use serde_json::Value;

/// The patch type, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (or `+cbor` is refused).
    Apply,
}

/// Maps a Content-Type to a patch type, 415 for anything else.
pub fn patch_type(content_type: &str) -> Result<PatchType, ApiError> {
    let base = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match base.as_str() {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
        _ => Err(ApiError::unsupported_media(content_type)),
    }
}

/// Parses a JSON body, 400 on malformed input.
pub fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))
}

/// Deepest nesting a YAML body may have: what serde_json allows a JSON body.
pub const MAX_YAML_DEPTH: usize = 128;

/// Parses a YAML (or JSON) body, 400 on malformed input or nesting deeper than
/// [`MAX_YAML_DEPTH`]. The depth is a budget of the reader, checked as its events stream: a deep
/// body is refused at the first level too many, before the rest of it is scanned.
pub fn parse_yaml(body: &[u8]) -> Result<Value, ApiError> {
    parse_yaml_noting_duplicates(body).map(|(v, _)| v)
}

/// [`parse_yaml`], also answering the dotted paths of the keys a mapping repeats (the last one
/// is kept), for `fieldValidation`.
pub fn parse_yaml_noting_duplicates(body: &[u8]) -> Result<(Value, Vec<String>), ApiError> {
    yaml::parse(body, MAX_YAML_DEPTH).map_err(|e| match e {
        yaml::ParseError::TooDeep => ApiError::bad_request(format!(
            "error decoding YAML: the document nests deeper than {MAX_YAML_DEPTH} levels"
        )),
        yaml::ParseError::Yaml(e) => ApiError::bad_request(format!("error decoding YAML: {e}")),
        yaml::ParseError::Thread(e) => ApiError::internal(format!("reading a YAML body: {e}")),
    })
}

/// Applies a patch body to `original`, returning the patched object.
pub fn apply(
    def: &ResourceDef,
    pt: PatchType,
    original: &Value,
    body: &[u8],
) -> Result<Value, ApiError> {
    match pt {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding JSON patch: {e}")))?;
            let mut doc = original.clone();
            json_patch::patch(&mut doc, &ops).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
            Ok(doc)
        }
        PatchType::Merge => {
            let p = parse_json(body)?;
            let mut doc = original.clone();
            json_patch::merge(&mut doc, &p);
            Ok(doc)
        }
        PatchType::Strategic => strategic::merge(def, original, &parse_json(body)?),
        PatchType::Apply => {
            let p = parse_yaml(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request("an apply patch must be an object"));
            }
            strategic::merge(def, original, &p)
        }
    }
}
