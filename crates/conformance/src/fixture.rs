//! The volumes, paths and injections a run creates, recorded before each step so that cleanup
//! (also after Ctrl-C) undoes exactly those and nothing else.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One volume this run asked for.
#[derive(Debug, Clone, Default)]
pub struct Created {
    /// The name given to CreateVolume (CreateVolume is idempotent by name).
    pub name: String,
    /// The id, once CreateVolume answered.
    pub volume_id: Option<String>,
    /// `Volume.volume_context`, passed on to stage and publish.
    pub context: HashMap<String, String>,
    /// ControllerPublishVolume's publish context, when it was called.
    pub publish_context: Option<HashMap<String, String>>,
    /// Staging path, once NodeStageVolume was attempted.
    pub staged: Option<PathBuf>,
    /// Target path, once NodePublishVolume was attempted.
    pub published: Option<PathBuf>,
}

/// What a run has created so far.
#[derive(Debug)]
pub struct Fixture {
    dir: tempfile::TempDir,
    run_id: String,
    volumes: Mutex<Vec<Created>>,
    injections: Mutex<Vec<(String, String)>>,
}

impl Fixture {
    /// A fixture whose temporary paths live under `parent` (the system temp dir by default).
    pub fn new(parent: Option<&Path>) -> std::io::Result<Fixture> {
        let dir = match parent {
            Some(p) => tempfile::Builder::new()
                .prefix("volhealth-conformance-")
                .tempdir_in(p)?,
            None => tempfile::Builder::new()
                .prefix("volhealth-conformance-")
                .tempdir()?,
        };
        let run_id: String = (0..8)
            .map(|_| char::from(b'a' + rand::random_range(0..26u8)))
            .collect();
        Ok(Fixture {
            dir,
            run_id,
            volumes: Mutex::default(),
            injections: Mutex::default(),
        })
    }

    /// This run's random id, part of every volume name.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// A new directory under the run's temp dir.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Ids of the volumes this run created.
    pub fn volume_ids(&self) -> Vec<String> {
        self.with(|v| v.iter().filter_map(|c| c.volume_id.clone()).collect())
    }

    /// Runs `f` on the recorded volumes.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Vec<Created>) -> T) -> T {
        match self.volumes.lock() {
            Ok(mut v) => f(&mut v),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Changes the record of the volume named `name`, if there is one.
    pub(crate) fn update(&self, name: &str, f: impl FnOnce(&mut Created)) {
        self.with(|v| {
            if let Some(c) = v.iter_mut().find(|c| c.name == name) {
                f(c);
            }
        });
    }

    /// Remembers an injection that was set, so cleanup clears it.
    pub fn injected(&self, scope: &str, target: &str) {
        if let Ok(mut i) = self.injections.lock() {
            let key = (scope.to_string(), target.to_string());
            if !i.contains(&key) {
                i.push(key);
            }
        }
    }

    /// The injections recorded and not yet cleared, as (scope, target).
    pub fn injections(&self) -> Vec<(String, String)> {
        self.injections
            .lock()
            .map(|i| i.clone())
            .unwrap_or_default()
    }

    /// Forgets an injection that was cleared.
    pub fn cleared(&self, scope: &str, target: &str) {
        if let Ok(mut i) = self.injections.lock() {
            i.retain(|(s, t)| !(s == scope && t == target));
        }
    }
}
