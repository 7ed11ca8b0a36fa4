//! The controller's in-memory view of its volumes and their detected health, refreshed in the
//! background so that health RPCs never touch the disk.

use crate::Result;
use crate::backend_image::{self, FsckOutcome};
use crate::condition::Condition;
use crate::config::BackendKind;
use crate::detect_controller::{self, Observation, Pool, SpaceThresholds};
use crate::records::{self, VolumeRecord};
use crate::state::StateDir;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// One volume as the controller knows it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The record.
    pub record: VolumeRecord,
    /// Detected conditions (empty until the first refresh after creation).
    pub detected: Vec<Condition>,
}

/// Size, mtime and inode of an image when it was last checked.
type ImageStamp = (u64, u64, i64, i64);

/// All volumes, sorted by id, with their detected health.
pub struct VolumeView {
    state: StateDir,
    limits: SpaceThresholds,
    entries: RwLock<BTreeMap<String, Entry>>,
    fsck: Mutex<HashMap<String, (ImageStamp, FsckOutcome)>>,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

impl VolumeView {
    /// Loads the records of a state dir (health is computed by [`VolumeView::refresh`]).
    pub fn load(state: StateDir, limits: SpaceThresholds) -> Result<Self> {
        let recs = records::load_all(&state)?;
        let entries = recs
            .into_iter()
            .map(|(id, record)| {
                (
                    id,
                    Entry {
                        record,
                        detected: Vec::new(),
                    },
                )
            })
            .collect();
        Ok(Self::from_entries(state, limits, entries))
    }

    /// A view over given entries (benchmarks and tests build large views without a disk).
    pub fn from_entries(
        state: StateDir,
        limits: SpaceThresholds,
        entries: BTreeMap<String, Entry>,
    ) -> Self {
        VolumeView {
            state,
            limits,
            entries: RwLock::new(entries),
            fsck: Mutex::new(HashMap::new()),
        }
    }

    /// The state dir.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// Adds or replaces a volume (after CreateVolume).
    pub fn insert(&self, record: VolumeRecord) {
        write(&self.entries).insert(
            record.id.clone(),
            Entry {
                record,
                detected: Vec::new(),
            },
        );
    }

    /// Forgets a volume (after DeleteVolume).
    pub fn remove(&self, id: &str) {
        write(&self.entries).remove(id);
    }

    /// One volume.
    pub fn get(&self, id: &str) -> Option<Entry> {
        read(&self.entries).get(id).cloned()
    }

    /// Number of volumes.
    pub fn len(&self) -> usize {
        read(&self.entries).len()
    }

    /// Whether there are no volumes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Up to `max` volumes after `after` (exclusive; from the start when None), and whether more follow.
    pub fn page_after(&self, after: Option<&str>, max: usize) -> (Vec<Entry>, bool) {
        use std::ops::Bound;
        let guard = read(&self.entries);
        let lower = match after {
            Some(a) => Bound::Excluded(a.to_string()),
            None => Bound::Unbounded,
        };
        let mut iter = guard.range((lower, Bound::Unbounded));
        let page: Vec<Entry> = iter.by_ref().take(max).map(|(_, e)| e.clone()).collect();
        let more = iter.next().is_some();
        (page, more)
    }

    /// Recomputes every volume's detected health from the disk (blocking; run off the RPC path).
    pub fn refresh(&self) {
        let snapshot: Vec<VolumeRecord> = read(&self.entries)
            .values()
            .map(|e| e.record.clone())
            .collect();
        let fsck = self.fsck.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut unbacked: u64 = 0;
        let mut observed = Vec::with_capacity(snapshot.len());
        for rec in snapshot {
            let path = rec.data_path(&self.state);
            let capacity = u64::try_from(rec.capacity_bytes).unwrap_or(0);
            let present = match rec.backend {
                BackendKind::Dir => crate::backend_dir::present(&path),
                BackendKind::Image => backend_image::present(&path),
            };
            let allocated = match rec.backend {
                BackendKind::Image if present => backend_image::allocated_bytes(&path),
                _ => 0,
            };
            if present {
                unbacked = unbacked.saturating_add(capacity.saturating_sub(allocated));
            }
            let obs = Observation {
                present,
                fsck: fsck.get(&rec.id).map(|(_, o)| o.clone()),
            };
            observed.push((rec, path, obs));
        }
        let pool = Pool {
            fs: detect_controller::fs_stats(&self.state.volumes_dir()),
            unbacked_bytes: unbacked,
        };
        let computed: Vec<(String, Vec<Condition>)> = observed
            .into_iter()
            .map(|(rec, path, obs)| {
                let c =
                    detect_controller::volume_conditions(&rec, &path, &obs, &pool, &self.limits);
                (rec.id, c)
            })
            .collect();
        let mut guard = write(&self.entries);
        for (id, detected) in computed {
            if let Some(entry) = guard.get_mut(&id) {
                entry.detected = detected;
            }
        }
    }

    /// Checks image filesystems that changed since their last check (never one attached to a
    /// loop device, whose live filesystem would look inconsistent).
    pub async fn check_images(&self, timeout: Duration) {
        let images: Vec<(String, PathBuf)> = read(&self.entries)
            .values()
            .filter(|e| e.record.backend == BackendKind::Image)
            .map(|e| (e.record.id.clone(), e.record.data_path(&self.state)))
            .collect();
        let attached = crate::mounts::loop_backing_files();
        for (id, path) in images {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let stamp: ImageStamp = (meta.len(), meta.ino(), meta.mtime(), meta.mtime_nsec());
            let known = self
                .fsck
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&id)
                .map(|(s, _)| *s);
            if known == Some(stamp) || attached.contains(&path) {
                continue;
            }
            let outcome = backend_image::fsck(&path, timeout).await;
            if let FsckOutcome::NotChecked(why) = &outcome {
                tracing::warn!(volume_id = %id, reason = %why, "filesystem check did not run");
                continue;
            }
            if let FsckOutcome::Corrupt { code, summary } = &outcome {
                tracing::warn!(volume_id = %id, code, summary = %summary, "filesystem check failed");
            }
            self.fsck
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, (stamp, outcome));
        }
    }
}

/// Runs the refresher and the image checker until `stop` resolves.
pub async fn run_refresher(
    view: Arc<VolumeView>,
    refresh_every: Duration,
    fsck_every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let checker = {
        let view = view.clone();
        let mut stop = stop.clone();
        async move {
            loop {
                view.check_images(Duration::from_secs(60)).await;
                tokio::select! {
                    _ = tokio::time::sleep(fsck_every) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    };
    let refresher = async move {
        loop {
            let v = view.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || v.refresh()).await {
                tracing::error!(error = %e, "health refresh task failed");
            }
            tokio::select! {
                _ = tokio::time::sleep(refresh_every) => {}
                _ = stop.changed() => return,
            }
        }
    };
    tokio::join!(checker, refresher);
}
