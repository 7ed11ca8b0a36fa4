//! What this node was asked to stage and publish, kept on disk so that NodeGetVolumeHealth can
//! answer for volumes whose stage or publish failed, also after a driver restart.

use crate::mounts::MountMethod;
use crate::state::{StateDir, read_json, write_json};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One stage or publish attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathAttempt {
    /// Staging or target path.
    pub path: String,
    /// What was mounted or linked there.
    pub source: String,
    /// How (None when the attempt failed before mounting).
    pub method: Option<MountMethod>,
    /// Read-only publish.
    #[serde(default)]
    pub readonly: bool,
    /// The error, when the attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl PathAttempt {
    /// Whether the attempt succeeded.
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
}

/// Attempts for one volume on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempts {
    /// The volume.
    pub volume_id: String,
    /// The latest NodeStageVolume.
    #[serde(default)]
    pub stage: Option<PathAttempt>,
    /// NodePublishVolume per target path.
    #[serde(default)]
    pub publishes: BTreeMap<String, PathAttempt>,
}

/// Loads a volume's attempts on a node.
pub fn load(state: &StateDir, node_id: &str, volume_id: &str) -> Result<Option<Attempts>> {
    if !crate::records::is_valid_volume_id(volume_id) {
        return Ok(None);
    }
    read_json(&state.attempt_path(node_id, volume_id))
}

/// Stores a volume's attempts; nothing left → the file is removed.
pub fn store(state: &StateDir, node_id: &str, attempts: &Attempts) -> Result<()> {
    let path = state.attempt_path(node_id, &attempts.volume_id);
    if attempts.stage.is_none() && attempts.publishes.is_empty() {
        return match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("removing attempt record", path, e)),
        };
    }
    write_json(&path, attempts)
}

/// Read-modify-write of a volume's attempts.
pub fn update(
    state: &StateDir,
    node_id: &str,
    volume_id: &str,
    change: impl FnOnce(&mut Attempts),
) -> Result<()> {
    let mut a = load(state, node_id, volume_id)?.unwrap_or_else(|| Attempts {
        volume_id: volume_id.into(),
        ..Default::default()
    });
    change(&mut a);
    store(state, node_id, &a)
}
