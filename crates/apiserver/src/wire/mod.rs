//! How objects travel: protobuf, Table output, discovery, OpenAPI, and the parsed request.

pub(crate) mod discovery;
pub(crate) mod openapi;
pub(crate) mod protobuf;
pub mod request;
pub(crate) mod table;

/// The strings of a JSON array (other items skipped); `None` when `v` is not an array.
pub(crate) fn strings(v: Option<&serde_json::Value>) -> Option<Vec<String>> {
    let items = v?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(serde_json::Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}
