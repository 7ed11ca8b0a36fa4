//! Directory volumes: `<state-dir>/volumes/<id>` is the volume.

use crate::{Error, Result};
use std::path::Path;

/// Creates the volume directory (an existing one is kept: create is idempotent).
pub fn create(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|e| Error::io("creating volume directory", path, e))
}

/// Deletes the volume directory and everything in it (absent is fine).
pub fn delete(path: &Path) -> Result<()> {
    let removed = std::fs::remove_dir_all(path);
    Error::unless_absent(removed, "deleting volume directory", path)
}

/// Whether the data is still there and is a directory.
pub fn present(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}
