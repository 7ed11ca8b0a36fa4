//! Layout of the state dir and crash-safe writes into it.
//!
//! ```text
//! <state-dir>/volumes/<id>          data of a directory volume (what an operator looks at)
//! <state-dir>/volumes/<id>.img      data of an image volume (sparse file, ext4)
//! <state-dir>/records/<id>.json     the driver's record of each volume it created
//! <state-dir>/nodes/<node>/attempts/<id>.json   stage and publish attempts on that node
//! <state-dir>/nodes/<node>/fallback/<id>/       image volume content when mounts are refused
//! <state-dir>/injections.json       injected conditions, RPC faults and list chaos
//! ```
//! Records live apart from the data so that data deleted out of band is detected, not forgotten.

use crate::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Paths inside one state dir.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// Wraps a state dir path (nothing is created).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StateDir { root: root.into() }
    }

    /// A state dir in a fresh temporary directory, for tests (removed with the directory).
    #[cfg(test)]
    #[allow(clippy::unwrap_used)]
    pub(crate) fn temp() -> (tempfile::TempDir, StateDir) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        (dir, state)
    }

    /// The state dir itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Directory holding volume data.
    pub fn volumes_dir(&self) -> PathBuf {
        self.root.join("volumes")
    }

    /// Directory holding the volume records.
    pub fn records_dir(&self) -> PathBuf {
        self.root.join("records")
    }

    /// Record file of one volume.
    pub fn record_path(&self, volume_id: &str) -> PathBuf {
        self.records_dir().join(format!("{volume_id}.json"))
    }

    /// Data directory of a directory volume.
    pub fn dir_volume_path(&self, volume_id: &str) -> PathBuf {
        self.volumes_dir().join(volume_id)
    }

    /// Image file of an image volume.
    pub fn image_path(&self, volume_id: &str) -> PathBuf {
        self.volumes_dir().join(format!("{volume_id}.img"))
    }

    /// Per-node directory.
    pub fn node_dir(&self, node_id: &str) -> PathBuf {
        self.root.join("nodes").join(node_id)
    }

    /// Stage/publish attempt record of a volume on a node.
    pub fn attempt_path(&self, node_id: &str, volume_id: &str) -> PathBuf {
        self.node_dir(node_id)
            .join("attempts")
            .join(format!("{volume_id}.json"))
    }

    /// Stand-in content directory for an image volume on a node that may not loop-mount.
    pub fn fallback_dir(&self, node_id: &str, volume_id: &str) -> PathBuf {
        self.node_dir(node_id).join("fallback").join(volume_id)
    }

    /// The injections file.
    pub fn injections_path(&self) -> PathBuf {
        self.root.join("injections.json")
    }

    /// Lock file serialising read-modify-write of the injections file.
    pub fn injections_lock_path(&self) -> PathBuf {
        self.root.join("injections.lock")
    }

    /// Creates the directories a driver needs.
    pub fn ensure(&self, node_id: &str) -> Result<()> {
        for dir in [
            self.volumes_dir(),
            self.records_dir(),
            self.node_dir(node_id).join("attempts"),
        ] {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io("creating directory", &dir, e))?;
        }
        Ok(())
    }
}

/// Replaces `path` with `bytes` so that readers see either the old or the new content:
/// write a temporary file beside it, flush it to disk, rename it over the old one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating directory", dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let mut file = std::fs::File::create(&tmp).map_err(|e| Error::io("creating", &tmp, e))?;
    file.write_all(bytes)
        .map_err(|e| Error::io("writing", &tmp, e))?;
    file.sync_all().map_err(|e| Error::io("syncing", &tmp, e))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io("renaming into place", path, e)
    })
}

/// Reads a JSON document, `None` when the file does not exist.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| Error::Json {
                what: "parsing",
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("reading", path, e)),
    }
}

/// Writes a JSON document atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| Error::Json {
        what: "encoding",
        path: path.to_path_buf(),
        source,
    })?;
    write_atomic(path, &bytes)
}
