//! The YAML files under `deploy/kubernetes/`, read as JSON values (one per YAML document).

use crate::{Error, Result};
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
    parse_documents(&text).map_err(|e| Error::Parse {
        path: shown,
        message: e.to_string(),
    })
}

/// Every document of a multi-document YAML text, in order (empty documents skipped).
pub fn parse_documents(
    text: &str,
) -> std::result::Result<Vec<serde_json::Value>, serde_saphyr::Error> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text)?;
    Ok(docs.into_iter().filter(|v| !v.is_null()).collect())
}

/// The one object of `kind` in `docs`.
pub fn the_one<'a>(docs: &'a [serde_json::Value], kind: &str) -> Option<&'a serde_json::Value> {
    let mut found = docs.iter().filter(|d| d["kind"] == kind);
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// A container's `args`, when it has a list of them and each is a string.
pub fn args(container: &serde_json::Value) -> Option<Vec<&str>> {
    container["args"]
        .as_array()?
        .iter()
        .map(serde_json::Value::as_str)
        .collect()
}

/// Whether a test that needs `kubectl` may skip without it: not when `VOLHEALTH_REQUIRE_TOOLS=1`.
fn may_skip() -> bool {
    std::env::var("VOLHEALTH_REQUIRE_TOOLS").as_deref() != Ok("1")
}

/// The objects `kubectl kustomize DIR` renders, or None (after saying `SKIPPED`) when kubectl is
/// not installed and `VOLHEALTH_REQUIRE_TOOLS` is not `1`.
pub fn kustomize(dir: &Path) -> Result<Option<Vec<serde_json::Value>>> {
    let shown = dir.display().to_string();
    let fail = |message: String| Error::Kustomize {
        dir: shown.clone(),
        message,
    };
    let out = match std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && may_skip() => {
            eprintln!("SKIPPED: kubectl is not installed");
            return Ok(None);
        }
        Err(e) => return Err(fail(format!("running kubectl: {e}"))),
    };
    if !out.status.success() {
        return Err(fail(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    let text = String::from_utf8(out.stdout).map_err(|e| fail(e.to_string()))?;
    parse_documents(&text)
        .map(Some)
        .map_err(|e| fail(e.to_string()))
}

/// `to` relative to `from` (both existing directories), as kustomize wants a base named; `None`
/// when either cannot be resolved.
pub fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    let (from, to) = (from.canonicalize().ok()?, to.canonicalize().ok()?);
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = PathBuf::new();
    for _ in from.components().skip(common) {
        out.push("..");
    }
    for c in to.components().skip(common) {
        out.push(c);
    }
    Some(out)
}
