//! Where each volume is staged and published on this node, learned from the NodeStageVolume and
//! NodePublishVolume calls the proxy forwards (and forgotten on the unstage and unpublish calls),
//! so that NodeGetVolumeHealth can be answered from a legacy driver with only a volume id. Kept in
//! `<state-dir>/paths.json` across restarts when a state dir is given.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// File name in the state dir.
pub const FILE: &str = "paths.json";

/// Most volumes remembered; a caller that stages more on one node is refused memory, not served
/// without bound (the oldest knowledge is kept, the new volume is not remembered).
const MAX_VOLUMES: usize = 65_536;
/// Most publish paths remembered per volume.
const MAX_PUBLISHES: usize = 1024;

/// The learned paths.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paths {
    /// Volume id → staging path.
    #[serde(default)]
    pub staged: BTreeMap<String, String>,
    /// Volume id → publish (target) paths.
    #[serde(default)]
    pub published: BTreeMap<String, BTreeSet<String>>,
}

/// A change the driver accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// NodeStageVolume(volume, staging path).
    Stage(String, String),
    /// NodeUnstageVolume(volume).
    Unstage(String),
    /// NodePublishVolume(volume, target path).
    Publish(String, String),
    /// NodeUnpublishVolume(volume, target path).
    Unpublish(String, String),
}

impl Paths {
    /// Applies `change`; whether anything changed.
    pub fn apply(&mut self, change: Change) -> bool {
        let room = |known: bool, len: usize| known || len < MAX_VOLUMES;
        match change {
            Change::Stage(v, p) => {
                if !room(self.staged.contains_key(&v), self.staged.len()) {
                    return false;
                }
                self.staged.insert(v, p.clone()) != Some(p)
            }
            Change::Unstage(v) => self.staged.remove(&v).is_some(),
            Change::Publish(v, p) => {
                if !room(self.published.contains_key(&v), self.published.len()) {
                    return false;
                }
                let set = self.published.entry(v).or_default();
                set.len() < MAX_PUBLISHES && set.insert(p)
            }
            Change::Unpublish(v, p) => {
                let Some(set) = self.published.get_mut(&v) else {
                    return false;
                };
                let removed = set.remove(&p);
                if set.is_empty() {
                    self.published.remove(&v);
                }
                removed
            }
        }
    }

    /// (publish path, staging path) to ask about `volume`; empty when not known.
    pub fn of(&self, volume: &str) -> (String, String) {
        (
            self.published
                .get(volume)
                .and_then(|s| s.iter().next().cloned())
                .unwrap_or_default(),
            self.staged.get(volume).cloned().unwrap_or_default(),
        )
    }

    /// Reads `<dir>/paths.json`; nothing known when it does not exist.
    pub fn load(dir: &Path) -> Result<Paths, std::io::Error> {
        match std::fs::read(dir.join(FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Paths::default()),
            Err(e) => Err(e),
        }
    }

    /// Writes `<dir>/paths.json` through a temporary file, so a crash leaves the old or the new.
    pub fn store(&self, dir: &Path) -> Result<(), std::io::Error> {
        std::fs::create_dir_all(dir)?;
        let tmp: PathBuf = dir.join(format!("{FILE}.tmp"));
        let text = serde_json::to_vec_pretty(self)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, dir.join(FILE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_publish_and_their_undoing_and_a_round_trip_through_the_file() {
        let mut p = Paths::default();
        assert!(p.apply(Change::Stage("v".into(), "/s".into())));
        assert!(
            !p.apply(Change::Stage("v".into(), "/s".into())),
            "no change"
        );
        assert!(p.apply(Change::Publish("v".into(), "/t1".into())));
        assert!(p.apply(Change::Publish("v".into(), "/t2".into())));
        assert_eq!(p.of("v"), ("/t1".to_string(), "/s".to_string()));
        assert!(p.apply(Change::Unpublish("v".into(), "/t1".into())));
        assert_eq!(p.of("v").0, "/t2");
        let dir = tempfile::tempdir().unwrap();
        p.store(dir.path()).unwrap();
        assert_eq!(Paths::load(dir.path()).unwrap(), p);
        assert!(p.apply(Change::Unpublish("v".into(), "/t2".into())));
        assert!(p.apply(Change::Unstage("v".into())));
        assert_eq!(p, Paths::default());
        assert_eq!(p.of("unknown"), (String::new(), String::new()));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(Paths::load(empty.path()).unwrap(), Paths::default());
        std::fs::write(empty.path().join(FILE), "{not json").unwrap();
        assert!(Paths::load(empty.path()).is_err());
    }
}
