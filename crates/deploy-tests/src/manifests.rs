//! The YAML files under `deploy/kubernetes/`, read as JSON values (one per YAML document).

use crate::{Error, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The repository's `deploy/kubernetes/` directory.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

/// Every document of a multi-document YAML file, in order (empty documents skipped).
pub fn documents(path: &Path) -> Result<Vec<serde_json::Value>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: shown.clone(),
        source,
    })?;
    parse_documents(&text).map_err(|message| Error::Parse {
        path: shown,
        message,
    })
}

/// Every document of a multi-document YAML text, in order (empty documents skipped).
pub fn parse_documents(text: &str) -> std::result::Result<Vec<serde_json::Value>, String> {
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(doc).map_err(|e| e.to_string())?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// The one object of `kind` in `docs`.
pub fn the_one<'a>(docs: &'a [serde_json::Value], kind: &str) -> Option<&'a serde_json::Value> {
    let mut found = docs.iter().filter(|d| d["kind"] == kind);
    let first = found.next()?;
    found.next().is_none().then_some(first)
}
