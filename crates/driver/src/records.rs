//! The driver's own record of each volume it created, kept apart from the volume data.

use crate::config::BackendKind;
use crate::state::{StateDir, read_json, write_json};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What the driver remembers about a volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeRecord {
    /// Volume id (derived from the name).
    pub id: String,
    /// The CreateVolume name.
    pub name: String,
    /// How the data is stored.
    pub backend: BackendKind,
    /// Provisioned size in bytes.
    pub capacity_bytes: i64,
    /// Creation time, RFC 3339.
    pub created_at: String,
}

impl VolumeRecord {
    /// Where the volume's data lives.
    pub fn data_path(&self, state: &StateDir) -> PathBuf {
        match self.backend {
            BackendKind::Dir => state.dir_volume_path(&self.id),
            BackendKind::Image => state.image_path(&self.id),
        }
    }
}

/// Deterministic volume id of a CreateVolume name, so that a repeated create finds the same volume.
pub fn volume_id_for(name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    format!("vh-{}", &hex::encode(digest)[..24])
}

/// Whether `id` has the shape of an id this driver hands out (so it is safe as a file name).
pub fn is_valid_volume_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !id.starts_with('.')
}

/// Loads one record.
pub fn load(state: &StateDir, id: &str) -> Result<Option<VolumeRecord>> {
    if !is_valid_volume_id(id) {
        return Ok(None);
    }
    read_json(&state.record_path(id))
}

/// Stores one record atomically.
pub fn store(state: &StateDir, record: &VolumeRecord) -> Result<()> {
    write_json(&state.record_path(&record.id), record)
}

/// Removes one record (absent is fine).
pub fn remove(state: &StateDir, id: &str) -> Result<()> {
    let path = state.record_path(id);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("removing volume record", path, e)),
    }
}

/// Loads every record, sorted by id. Unreadable records are skipped with a warning.
pub fn load_all(state: &StateDir) -> Result<BTreeMap<String, VolumeRecord>> {
    let dir = state.records_dir();
    let mut out = BTreeMap::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io("listing volume records", dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("listing volume records", &dir, e))?;
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        match read_json::<VolumeRecord>(&path) {
            Ok(Some(rec)) => {
                out.insert(rec.id.clone(), rec);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "skipping unreadable volume record"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_deterministic_and_safe() {
        let a = volume_id_for("pvc-1");
        assert_eq!(a, volume_id_for("pvc-1"));
        assert_ne!(a, volume_id_for("pvc-2"));
        assert!(is_valid_volume_id(&a));
        assert!(!is_valid_volume_id("../etc"));
        assert!(!is_valid_volume_id(""));
    }
}
