//! The kernel log, read from `/dev/kmsg` on a thread of its own from the detector's start on,
//! kept as the last storage event per block device and the NFS servers not responding.
//!
//! The reader blocks in `read(2)` on its own thread, so a quiet log costs no CPU and the async
//! runtime never waits on it. Memory is bounded: one entry per device or server, at most
//! [`MAX_ENTRIES`] of each, the oldest dropped first.

use crate::block_devices::Sysfs;
use crate::kernel_lines::{Effect, Subject, classify};
use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Devices (and, apart, NFS servers) remembered at most.
pub const MAX_ENTRIES: usize = 1024;

/// The last storage event of one block device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEvent {
    /// The worst effect since the device's errors began (a shutdown outweighs later I/O errors).
    pub effect: Effect,
    /// The last line that named it.
    pub line: String,
    /// When that line was read.
    pub last: Instant,
    /// Lines that named it since its errors began.
    pub count: u64,
}

/// An NFS server that stopped answering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEvent {
    /// The line that said so.
    pub line: String,
    /// When it was read.
    pub since: Instant,
}

#[derive(Debug, Default)]
struct Events {
    devices: HashMap<String, DeviceEvent>,
    servers: HashMap<String, ServerEvent>,
    matched: u64,
}

/// What the kernel log said, shared by the reader thread and the detector.
#[derive(Debug, Clone)]
pub struct KernelLog {
    events: Arc<Mutex<Events>>,
    sysfs: Sysfs,
}

fn severity(effect: Effect) -> u8 {
    match effect {
        Effect::IoError => 1,
        Effect::ReadOnly => 2,
        Effect::Shutdown => 3,
        Effect::ServerDown | Effect::ServerUp => 0,
    }
}

impl KernelLog {
    /// A log that knows nothing yet; lines come through [`KernelLog::ingest`].
    pub fn new(sysfs: Sysfs) -> KernelLog {
        KernelLog {
            events: Arc::new(Mutex::new(Events::default())),
            sysfs,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Events> {
        // The maps stay consistent across a panic in another holder: each change is one insert.
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a thread that reads `path` (`/dev/kmsg`) from its end on into this log, until the
    /// log is dropped. Fails when the file cannot be opened (no `CAP_SYSLOG`, not mounted).
    pub fn follow(&self, path: &Path, window: Duration) -> std::io::Result<()> {
        let mut file = std::fs::File::open(path)?;
        // Only what happens from now on: older errors were before this agent could know
        // whether they still matter.
        file.seek(SeekFrom::End(0))?;
        let weak = Arc::downgrade(&self.events);
        let sysfs = self.sysfs.clone();
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("kmsg-reader".into())
            .spawn(move || read_loop(file, weak, sysfs, window, &shown))?;
        Ok(())
    }

    /// Takes one record (a `/dev/kmsg` record, a `<PRI>` line or a bare message) read at `now`;
    /// true when it said something about storage.
    pub fn ingest(&self, record: &str, now: Instant, window: Duration) -> bool {
        let Some(event) = classify(record) else {
            return false;
        };
        let names = match &event.subject {
            Subject::NfsServer(_) => Vec::new(),
            subject => self.sysfs.names_of(subject),
        };
        let mut events = self.lock();
        events.matched += 1;
        match (&event.subject, event.effect) {
            (Subject::NfsServer(server), Effect::ServerDown) => {
                let entry = ServerEvent {
                    line: event.line,
                    since: now,
                };
                bounded_insert(&mut events.servers, server, entry, |e| e.since);
            }
            (Subject::NfsServer(server), _) => {
                events.servers.remove(server);
            }
            (_, effect) => {
                for name in names {
                    let entry = match events.devices.get(&name) {
                        Some(old) if now.saturating_duration_since(old.last) < window => {
                            DeviceEvent {
                                effect: if severity(effect) > severity(old.effect) {
                                    effect
                                } else {
                                    old.effect
                                },
                                line: event.line.clone(),
                                last: now,
                                count: old.count + 1,
                            }
                        }
                        _ => DeviceEvent {
                            effect,
                            line: event.line.clone(),
                            last: now,
                            count: 1,
                        },
                    };
                    bounded_insert(&mut events.devices, &name, entry, |e| e.last);
                }
            }
        }
        true
    }

    /// The event of the devices in `names` whose last line is within `window` of `now`: the
    /// worst effect among them and the latest line.
    pub fn device_event(
        &self,
        names: &BTreeSet<String>,
        now: Instant,
        window: Duration,
    ) -> Option<DeviceEvent> {
        let mut events = self.lock();
        events
            .devices
            .retain(|_, e| now.saturating_duration_since(e.last) < window);
        let mut found: Option<DeviceEvent> = None;
        for event in names.iter().filter_map(|n| events.devices.get(n)) {
            found = Some(match found {
                None => event.clone(),
                Some(f) => {
                    let worst = if severity(event.effect) > severity(f.effect) {
                        event.effect
                    } else {
                        f.effect
                    };
                    let latest = if event.last > f.last { event } else { &f };
                    DeviceEvent {
                        effect: worst,
                        line: latest.line.clone(),
                        last: latest.last,
                        count: f.count + event.count,
                    }
                }
            });
        }
        found
    }

    /// Whether any device has an event now (a quiet node skips the sysfs walk).
    pub fn has_device_events(&self) -> bool {
        !self.lock().devices.is_empty()
    }

    /// The NFS server `server` is not responding: the line that said so.
    pub fn server_down(&self, server: &str) -> Option<ServerEvent> {
        self.lock().servers.get(server).cloned()
    }

    /// Storage lines read since the start.
    pub fn matched(&self) -> u64 {
        self.lock().matched
    }
}

fn bounded_insert<E>(
    map: &mut HashMap<String, E>,
    key: &str,
    value: E,
    age: impl Fn(&E) -> Instant,
) {
    if !map.contains_key(key)
        && map.len() >= MAX_ENTRIES
        && let Some(oldest) = map
            .iter()
            .min_by_key(|(_, e)| age(e))
            .map(|(k, _)| k.clone())
    {
        map.remove(&oldest);
    }
    map.insert(key.to_string(), value);
}

fn read_loop(
    mut file: std::fs::File,
    events: Weak<Mutex<Events>>,
    sysfs: Sysfs,
    window: Duration,
    path: &str,
) {
    // One record per read; records are at most about 8 KiB with their dictionary.
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            // EPIPE: records were overwritten before this thread read them; go on with the next.
            Err(e) if e.raw_os_error() == Some(nix::libc::EPIPE) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!("reading {path} stopped: {e}; kernel log signals are off");
                return;
            }
        };
        let Some(events) = events.upgrade() else {
            return;
        };
        let log = KernelLog {
            events,
            sysfs: sysfs.clone(),
        };
        let record = String::from_utf8_lossy(&buf[..n]);
        log.ingest(&record, Instant::now(), window);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(600);

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn errors_last_for_the_window_and_keep_the_worst_effect() {
        let log = KernelLog::new(Sysfs::new("/nonexistent"));
        let t0 = Instant::now();
        assert!(!log.has_device_events());
        assert!(log.ingest(
            "XFS (sdb1): Filesystem has been shut down due to log error (0x2).",
            t0,
            WINDOW
        ));
        let later = t0 + Duration::from_secs(60);
        assert!(log.ingest(
            "Buffer I/O error on dev sdb1, logical block 0, lost async page write",
            later,
            WINDOW
        ));
        let e = log
            .device_event(&names(&["sdb", "sdb1"]), later, WINDOW)
            .unwrap();
        assert_eq!(e.effect, Effect::Shutdown);
        assert!(e.line.starts_with("Buffer I/O error"));
        assert_eq!(e.count, 2);
        assert_eq!(log.device_event(&names(&["sdc"]), later, WINDOW), None);
        // A window without a new line clears it.
        let quiet = later + WINDOW;
        assert_eq!(log.device_event(&names(&["sdb1"]), quiet, WINDOW), None);
        assert!(!log.has_device_events());
    }

    #[test]
    fn nfs_servers_come_and_go() {
        let log = KernelLog::new(Sysfs::new("/nonexistent"));
        let now = Instant::now();
        log.ingest(
            "<3>nfs: server 10.0.0.5 not responding, still trying",
            now,
            WINDOW,
        );
        assert!(log.server_down("10.0.0.5").is_some());
        assert!(log.server_down("10.0.0.6").is_none());
        log.ingest("<3>nfs: server 10.0.0.5 OK", now, WINDOW);
        assert!(log.server_down("10.0.0.5").is_none());
    }

    #[test]
    fn memory_is_bounded() {
        let log = KernelLog::new(Sysfs::new("/nonexistent"));
        let t0 = Instant::now();
        for i in 0..(MAX_ENTRIES + 50) {
            let at = t0 + Duration::from_millis(i as u64);
            log.ingest(
                &format!("I/O error, dev loop{i}, sector 0 op 0x0:(READ)"),
                at,
                WINDOW,
            );
        }
        assert_eq!(log.lock().devices.len(), MAX_ENTRIES);
        assert!(
            !log.lock().devices.contains_key("loop0"),
            "the oldest went first"
        );
        // A remount someone asked for is not an event.
        assert!(!log.ingest("EXT4-fs (loop1): re-mounted 1ebe45f2 ro.", t0, WINDOW));
    }
}
