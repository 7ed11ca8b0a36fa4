//! The detector: one volume's or one driver's health, as NodeGetVolumeHealth and
//! NodeGetStorageHealth would answer it, from the mount table, `statfs` probes, the kernel log
//! and sysfs.

use crate::block_devices::Sysfs;
use crate::kernel_lines::Effect;
use crate::kernel_log::KernelLog;
use crate::metrics::*;
use crate::mount_table::{Mount, MountTable};
use crate::probe_pool::{Probe, ProbePool};
use crate::reasons::{self, bounded};
use crate::{Error, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use volhealth_csi_proto::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_csi_proto::v1::volume_health::VolumeHealthEntry;
use volhealth_csi_proto::v1::{StorageHealthErrorType, VolumeHealthErrorType};

/// Where the detector looks and how long it waits.
#[derive(Debug, Clone)]
pub struct DetectorConfig {
    /// The host's mount table; the first that can be read is used (`/proc/1/mountinfo` with
    /// hostPID, else the agent's own, which shows the kubelet's mounts through propagation).
    pub mountinfo: Vec<PathBuf>,
    /// sysfs.
    pub sys_root: PathBuf,
    /// The kernel log device; `None` reads no kernel log.
    pub kmsg: Option<PathBuf>,
    /// How long a `statfs` may take before the mount counts as unresponsive.
    pub probe_timeout: Duration,
    /// How long a device stays faulty after its last kernel I/O error line.
    pub io_error_window: Duration,
    /// Threads at most for `statfs` probes.
    pub max_probe_threads: usize,
    /// A mount table younger than this is reused (one read serves a cycle's volumes).
    pub mount_table_max_age: Duration,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            mountinfo: vec!["/proc/1/mountinfo".into(), "/proc/self/mountinfo".into()],
            sys_root: "/sys".into(),
            kmsg: Some("/dev/kmsg".into()),
            probe_timeout: Duration::from_secs(5),
            io_error_window: Duration::from_secs(600),
            max_probe_threads: 32,
            mount_table_max_age: Duration::from_secs(1),
        }
    }
}

/// One volume as NodeGetVolumeHealth names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeQuery {
    /// The CSI driver (its storage health is built from the volumes asked about).
    pub driver: String,
    /// The volume id.
    pub volume_id: String,
    /// Where it is published, when it is.
    pub publish_path: Option<PathBuf>,
    /// Where it is staged, when it is.
    pub staging_path: Option<PathBuf>,
}

/// How long a path asked about counts as the driver's, for its storage health.
const SEEN_FOR: Duration = Duration::from_secs(3600);

/// The node fault detector. Shared by reference; every method takes `&self`.
#[derive(Debug)]
pub struct Detector {
    config: DetectorConfig,
    pool: ProbePool,
    log: KernelLog,
    sysfs: Sysfs,
    kernel_log_read: bool,
    table: Mutex<Option<(Instant, Arc<MountTable>)>>,
    /// Driver → the mounted paths of its volumes asked about, with when.
    seen: Mutex<HashMap<String, HashMap<PathBuf, Instant>>>,
    /// Some volume was looked at: from then on a driver with no mounted volume has no storage
    /// fault to show from this node (before, nothing is known at all).
    looked: std::sync::atomic::AtomicBool,
    metrics: Arc<NodeFaultMetrics>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Caches only: a panic elsewhere cannot leave them harmful.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn volume_entry(status: VolumeHealthErrorType, reason: &str, message: String) -> VolumeHealthEntry {
    VolumeHealthEntry {
        status: status as i32,
        reason: reason.to_string(),
        message: bounded(message),
    }
}

impl Detector {
    /// Starts a detector: its probe pool, and the kernel log reader when `config.kmsg` is set.
    /// A kernel log that cannot be read is logged once and leaves the other signals working.
    pub fn start(config: DetectorConfig, metrics: Arc<NodeFaultMetrics>) -> Detector {
        let sysfs = Sysfs::new(config.sys_root.clone());
        let log = KernelLog::new(sysfs.clone());
        let kernel_log_read = match &config.kmsg {
            Some(path) => match log.follow(path, config.io_error_window) {
                Ok(()) => {
                    tracing::info!(
                        "node fault detection reads the kernel log {}",
                        path.display()
                    );
                    true
                }
                Err(e) => {
                    tracing::warn!(
                        "node fault detection cannot read the kernel log {}: {e}; kernel I/O errors, filesystem shutdowns and NFS server outages go unseen (it needs /dev/kmsg mounted and CAP_SYSLOG)",
                        path.display()
                    );
                    false
                }
            },
            None => false,
        };
        Detector {
            pool: ProbePool::new(config.max_probe_threads),
            log,
            sysfs,
            kernel_log_read,
            table: Mutex::new(None),
            seen: Mutex::new(HashMap::new()),
            looked: std::sync::atomic::AtomicBool::new(false),
            metrics,
            config,
        }
    }

    /// The kernel log as the detector knows it (lines can also be fed in by hand).
    pub fn kernel_log(&self) -> &KernelLog {
        &self.log
    }

    /// The `statfs` probe pool.
    pub fn probe_pool(&self) -> &ProbePool {
        &self.pool
    }

    /// Whether the kernel log is being read.
    pub fn reads_kernel_log(&self) -> bool {
        self.kernel_log_read
    }

    fn mount_table(&self) -> Result<Arc<MountTable>> {
        let mut cached = lock(&self.table);
        if let Some((at, table)) = cached.as_ref()
            && at.elapsed() < self.config.mount_table_max_age
        {
            return Ok(table.clone());
        }
        let mut last = None;
        for path in &self.config.mountinfo {
            match MountTable::read(path) {
                Ok(table) => {
                    let table = Arc::new(table);
                    *cached = Some((Instant::now(), table.clone()));
                    return Ok(table);
                }
                Err(e) => last = Some(format!("reading {}: {e}", path.display())),
            }
        }
        self.metrics.count(SIGNAL_MOUNT_TABLE, RESULT_ERROR);
        Err(Error::CannotLook(
            last.unwrap_or_else(|| "no mount table configured".into()),
        ))
    }

    /// The volume's health conditions (empty: nothing wrong found). An error means the
    /// detector could not look, which is no report: never read it as healthy.
    pub async fn volume_health(&self, query: &VolumeQuery) -> Result<Vec<VolumeHealthEntry>> {
        use VolumeHealthErrorType::Inaccessible;
        let table = self.mount_table()?;
        let paths: Vec<&PathBuf> = [&query.publish_path, &query.staging_path]
            .into_iter()
            .flatten()
            .collect();
        if paths.is_empty() {
            return Err(Error::CannotLook(format!(
                "volume {}: neither a publish nor a staging path",
                query.volume_id
            )));
        }
        let mut entries = Vec::new();
        // The path the kubelet said is mounted and the workload uses: the publish path, else
        // the staging path (a driver without staging leaves its staging directory unmounted).
        let main = query.publish_path.as_ref().or(query.staging_path.as_ref());
        let mounted: Vec<(&PathBuf, &Mount)> = paths
            .iter()
            .filter_map(|p| table.get(p).map(|m| (*p, m)))
            .collect();
        if let Some(main) = main
            && table.get(main).is_none()
        {
            self.metrics.count(SIGNAL_MOUNT_TABLE, RESULT_FAULT);
            entries.push(volume_entry(
                Inaccessible,
                reasons::NOT_MOUNTED,
                format!(
                    "{} is not mounted, though the kubelet set the volume up there",
                    main.display()
                ),
            ));
        }
        if let Some(entry) = read_only_entry(query, &mounted) {
            self.metrics.count(SIGNAL_MOUNT_TABLE, RESULT_FAULT);
            entries.push(entry);
        } else if entries.is_empty() {
            self.metrics.count(SIGNAL_MOUNT_TABLE, RESULT_OK);
        }
        self.remember(&query.driver, mounted.iter().map(|(p, _)| (*p).clone()));
        self.looked
            .store(true, std::sync::atomic::Ordering::Relaxed);

        // statfs each mounted filesystem of the volume at once, each under the deadline. The
        // publish bind mount reaches the same superblock as the staging mount, so one probe
        // (the publish path's, listed first) answers for both.
        let mut probed: Vec<&(&PathBuf, &Mount)> = Vec::new();
        for m in &mounted {
            if !probed
                .iter()
                .any(|(_, p)| (p.major, p.minor) == (m.1.major, m.1.minor))
            {
                probed.push(m);
            }
        }
        let probes = futures::future::join_all(
            probed
                .iter()
                .map(|(p, _)| self.pool.statfs(p, self.config.probe_timeout)),
        )
        .await;
        self.metrics.set_in_flight(self.pool.in_flight());
        let mut unprobed = Vec::new();
        for ((path, _), probe) in probed.iter().zip(probes) {
            match probe {
                Probe::Answered => self.metrics.count(SIGNAL_STATFS, RESULT_OK),
                Probe::Failed(errno) => match reasons::of_errno(errno) {
                    Some(reason) => {
                        self.metrics.count(SIGNAL_STATFS, RESULT_FAULT);
                        push_unique(
                            &mut entries,
                            volume_entry(
                                Inaccessible,
                                reason,
                                format!("statfs of {} failed: {}", path.display(), errno.desc()),
                            ),
                        );
                    }
                    None => {
                        self.metrics.count(SIGNAL_STATFS, RESULT_ERROR);
                        unprobed.push(path);
                    }
                },
                Probe::NoAnswer { running_for } => {
                    self.metrics.count(SIGNAL_STATFS, RESULT_TIMEOUT);
                    self.metrics.timed_out();
                    push_unique(
                        &mut entries,
                        volume_entry(
                            Inaccessible,
                            reasons::MOUNT_UNRESPONSIVE,
                            format!(
                                "statfs of {} has not answered for {}s (probe timeout {}s)",
                                path.display(),
                                running_for.as_secs(),
                                self.config.probe_timeout.as_secs_f64()
                            ),
                        ),
                    );
                }
                Probe::NoCapacity => {
                    self.metrics.count(SIGNAL_STATFS, RESULT_ERROR);
                    unprobed.push(path);
                }
            }
        }

        if let Some(entry) = self.kernel_log_entry(&mounted) {
            self.metrics.count(SIGNAL_KERNEL_LOG, RESULT_FAULT);
            entries.push(entry);
        } else if self.kernel_log_read {
            self.metrics.count(SIGNAL_KERNEL_LOG, RESULT_OK);
        }
        if entries.is_empty() && !unprobed.is_empty() {
            return Err(Error::CannotLook(format!(
                "statfs of {} could not run (every probe thread is held by a hung mount) or failed",
                unprobed[0].display()
            )));
        }
        Ok(entries)
    }

    fn kernel_log_entry(&self, mounted: &[(&PathBuf, &Mount)]) -> Option<VolumeHealthEntry> {
        if !self.log.has_device_events() {
            return None;
        }
        let mut devices = BTreeSet::new();
        for (_, m) in mounted {
            devices.extend(self.sysfs.stack_of(m.major, m.minor));
        }
        let event = self
            .log
            .device_event(&devices, Instant::now(), self.config.io_error_window)?;
        let (status, what) = match event.effect {
            Effect::Shutdown => (
                VolumeHealthErrorType::Inaccessible,
                "the filesystem shut down",
            ),
            Effect::ReadOnly => (
                VolumeHealthErrorType::Inaccessible,
                "the filesystem went read-only",
            ),
            _ => (VolumeHealthErrorType::Degraded, "I/O errors"),
        };
        let names: Vec<&str> = devices.iter().map(String::as_str).collect();
        Some(volume_entry(
            status,
            reasons::IO_ERRORS,
            format!(
                "the kernel logged {} storage error line(s) for {} in the last {}s ({what}); last: {}",
                event.count,
                names.join(","),
                self.config.io_error_window.as_secs(),
                event.line
            ),
        ))
    }

    fn remember(&self, driver: &str, paths: impl Iterator<Item = PathBuf>) {
        let now = Instant::now();
        let mut paths = paths.peekable();
        let mut seen = lock(&self.seen);
        // Only drivers with mounted volumes are kept.
        if paths.peek().is_none() && !seen.contains_key(driver) {
            return;
        }
        let entry = seen.entry(driver.to_string()).or_default();
        entry.retain(|_, at| now.saturating_duration_since(*at) < SEEN_FOR);
        for p in paths {
            entry.insert(p, now);
        }
    }

    /// The driver's storage backend conditions, from the mounts of its volumes asked about
    /// through [`Detector::volume_health`]. An error (no volume at all asked about yet) is no
    /// report; a driver none of whose volumes was seen mounted has nothing to show here.
    pub async fn storage_health(&self, driver: &str) -> Result<Vec<StorageBackendHealth>> {
        let paths: Vec<PathBuf> = match lock(&self.seen).get(driver) {
            Some(paths) => paths.keys().cloned().collect(),
            None if self.looked.load(std::sync::atomic::Ordering::Relaxed) => Vec::new(),
            None => {
                return Err(Error::CannotLook(format!(
                    "no volume looked at yet, so nothing is known of driver {driver}'s storage"
                )));
            }
        };
        let table = self.mount_table()?;
        let mounts: Vec<&Mount> = paths.iter().filter_map(|p| table.get(p)).collect();
        let mut out = Vec::new();

        let mut servers: BTreeMap<String, String> = BTreeMap::new();
        for m in &mounts {
            if let Some(server) = m.nfs_server()
                && let Some(down) = self.log.server_down(&server)
            {
                servers.insert(server, down.line);
            }
        }
        if !servers.is_empty() {
            self.metrics.count(SIGNAL_KERNEL_LOG, RESULT_FAULT);
            let lines: Vec<String> = servers.values().cloned().collect();
            out.push(StorageBackendHealth {
                status: StorageHealthErrorType::StorageUnreachable as i32,
                reason: reasons::NFS_SERVER_NOT_RESPONDING.into(),
                message: bounded(format!(
                    "NFS server {} of this driver's mounts is not responding: {}",
                    servers.keys().cloned().collect::<Vec<_>>().join(", "),
                    lines.join("; ")
                )),
                volume_capability: None,
            });
        }
        if let Some(entry) = self.path_entry(&mounts) {
            out.push(entry);
        }
        Ok(out)
    }

    /// iSCSI sessions failed and multipath paths down under the driver's devices.
    fn path_entry(&self, mounts: &[&Mount]) -> Option<StorageBackendHealth> {
        let mut devices = BTreeSet::new();
        for m in mounts {
            devices.extend(self.sysfs.stack_of(m.major, m.minor));
        }
        if devices.is_empty() {
            return None;
        }
        let failed_sessions = self.sysfs.failed_iscsi_sessions();
        let mut dead: BTreeSet<String> = BTreeSet::new();
        let mut notes = Vec::new();
        for (session, state) in &failed_sessions {
            let hit: Vec<String> = self
                .sysfs
                .names_of(&crate::kernel_lines::Subject::IscsiSession(session.clone()))
                .into_iter()
                .filter(|n| devices.contains(n))
                .collect();
            if !hit.is_empty() {
                notes.push(format!("iSCSI {session} is {state} ({})", hit.join(",")));
                dead.extend(hit);
            }
        }
        let mut none_left = false;
        let mut any_down = !dead.is_empty();
        let mut in_maps = BTreeSet::new();
        for name in &devices {
            if let Some((total, mut down)) = self.sysfs.paths_down(name) {
                let slaves = self.sysfs.slaves(name);
                down.extend(slaves.into_iter().filter(|s| dead.contains(s)));
                down.sort();
                down.dedup();
                in_maps.extend(down.iter().cloned());
                if !down.is_empty() {
                    any_down = true;
                    none_left |= down.len() >= total;
                    notes.push(format!(
                        "multipath {name}: {} of {total} paths down ({})",
                        down.len(),
                        down.join(",")
                    ));
                }
            }
        }
        // A failed session under no multipath map was the device's only path.
        if dead.iter().any(|d| !in_maps.contains(d)) {
            none_left = true;
        }
        self.metrics.count(
            SIGNAL_SYSFS,
            if any_down { RESULT_FAULT } else { RESULT_OK },
        );
        if !any_down {
            return None;
        }
        let status = if none_left {
            StorageHealthErrorType::StorageUnreachable
        } else {
            StorageHealthErrorType::StorageDegraded
        };
        Some(StorageBackendHealth {
            status: status as i32,
            reason: reasons::PATH_DOWN.into(),
            message: bounded(notes.join("; ")),
            volume_capability: None,
        })
    }
}

/// FilesystemReadOnly when the filesystem's superblock is read-only while the volume was
/// mounted read-write. The publish mount's own `ro` is what the kubelet asked for (the pod's,
/// the claim's or the PV's read-only); without a publish mount, the staging mount's.
fn read_only_entry(
    query: &VolumeQuery,
    mounted: &[(&PathBuf, &Mount)],
) -> Option<VolumeHealthEntry> {
    let intended = query
        .publish_path
        .as_ref()
        .or(query.staging_path.as_ref())
        .and_then(|p| mounted.iter().find(|(q, _)| *q == p))
        .or_else(|| mounted.first())?;
    let (path, mount) = intended;
    if mount.mount_read_only() {
        return None;
    }
    let (_, ro) = mounted.iter().find(|(_, m)| m.super_read_only())?;
    Some(volume_entry(
        VolumeHealthErrorType::Inaccessible,
        reasons::FILESYSTEM_READ_ONLY,
        format!(
            "the {} filesystem on {} is read-only (superblock options {}) though {} was mounted read-write",
            ro.fs_type,
            ro.source,
            ro.super_options,
            path.display()
        ),
    ))
}

fn push_unique(entries: &mut Vec<VolumeHealthEntry>, entry: VolumeHealthEntry) {
    if !entries
        .iter()
        .any(|e| e.status == entry.status && e.reason == entry.reason)
    {
        entries.push(entry);
    }
}
