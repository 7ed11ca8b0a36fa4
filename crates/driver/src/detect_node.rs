//! Node-side detection for NodeGetVolumeHealth: are the staged and published paths what they
//! should be, and does I/O through them work in time.
//!
//! - stage or publish attempted but failed, or its path missing or not mounted → Inaccessible
//! - backing data gone → Inaccessible
//! - write-and-read-back probe slower than the slow threshold → Degraded, failing or past the
//!   deadline → Inaccessible. A probe stuck on a hung filesystem is not started again until it
//!   returns, so stuck threads never pile up.

use crate::attempts::{Attempts, PathAttempt};
use crate::condition::{Condition, volume_status};
use crate::mounts::MountMethod;
use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Everything the node check needs, gathered by the RPC handler.
#[derive(Debug, Clone)]
pub struct NodeCheckInput {
    /// The volume.
    pub volume_id: String,
    /// Recorded attempts on this node.
    pub attempts: Option<Attempts>,
    /// Where the volume's data lives, when the volume record exists.
    pub data_path: Option<PathBuf>,
    /// Publish path named in the request (may be empty).
    pub publish_path: String,
    /// Staging path named in the request (may be empty).
    pub staging_path: String,
    /// Name of the probe file (unique per node, so nodes sharing a volume do not collide).
    pub probe_name: String,
}

fn inaccessible(reason: &str, message: String) -> Condition {
    Condition::new(volume_status::INACCESSIBLE, reason, message)
}

fn check_attempt(
    kind: &str,
    a: &PathAttempt,
    mounts: &HashSet<PathBuf>,
    out: &mut Vec<Condition>,
) -> bool {
    let (failed, missing, unmounted) = match kind {
        "stage" => ("StageFailed", "StagingPathMissing", "StagingPathNotMounted"),
        _ => (
            "PublishFailed",
            "PublishPathMissing",
            "PublishPathNotMounted",
        ),
    };
    if let Some(err) = &a.error {
        out.push(inaccessible(
            failed,
            format!("{kind} of {} failed: {err}", a.path),
        ));
        return false;
    }
    let path = Path::new(&a.path);
    if std::fs::symlink_metadata(path).is_err() {
        out.push(inaccessible(
            missing,
            format!("{kind} path {} does not exist", a.path),
        ));
        return false;
    }
    match a.method {
        Some(MountMethod::Symlink) => {
            let link = std::fs::read_link(path).ok();
            if link.as_deref() != Some(Path::new(&a.source)) {
                let found = link
                    .map(|l| l.display().to_string())
                    .unwrap_or_else(|| "no symlink".into());
                out.push(inaccessible(
                    unmounted,
                    format!(
                        "{kind} path {} should link to {} but has {found}",
                        a.path, a.source
                    ),
                ));
                return false;
            }
        }
        Some(_) => {
            let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            if !mounts.contains(&canonical) {
                out.push(inaccessible(
                    unmounted,
                    format!(
                        "{kind} path {} is not a mount point (expected {})",
                        a.path, a.source
                    ),
                ));
                return false;
            }
        }
        None => {}
    }
    true
}

/// Checks paths and records (blocking). Returns the conditions and the path to probe, if any.
pub fn check_paths(
    input: &NodeCheckInput,
    mounts: &HashSet<PathBuf>,
) -> (Vec<Condition>, Option<(PathBuf, bool)>) {
    let mut out = Vec::new();
    let mut probe: Option<(PathBuf, bool)> = None;
    if let Some(data) = &input.data_path
        && std::fs::symlink_metadata(data).is_err()
    {
        out.push(inaccessible(
            "BackingDataMissing",
            format!("volume data {} does not exist", data.display()),
        ));
    }
    if let Some(a) = &input.attempts {
        if let Some(stage) = &a.stage
            && (input.staging_path.is_empty() || input.staging_path == stage.path)
            && check_attempt("stage", stage, mounts, &mut out)
        {
            probe = Some((PathBuf::from(&stage.path), false));
        }
        for (target, p) in &a.publishes {
            if !input.publish_path.is_empty() && &input.publish_path != target {
                continue;
            }
            if check_attempt("publish", p, mounts, &mut out) {
                probe = Some((PathBuf::from(target), p.readonly));
            }
        }
    }
    if !input.publish_path.is_empty()
        && input
            .attempts
            .as_ref()
            .is_none_or(|a| !a.publishes.contains_key(&input.publish_path))
    {
        if std::fs::symlink_metadata(&input.publish_path).is_err() {
            out.push(inaccessible(
                "PublishPathMissing",
                format!("publish path {} does not exist", input.publish_path),
            ));
        } else if probe.is_none() {
            probe = Some((PathBuf::from(&input.publish_path), false));
        }
    }
    if out.iter().any(|c| c.status == volume_status::INACCESSIBLE) {
        probe = None;
    }
    (out, probe)
}

/// Writes 4 KiB, syncs, reads it back and compares (read-only paths: lists the directory).
pub fn io_probe(dir: &Path, readonly: bool, name: &str) -> std::io::Result<()> {
    if readonly {
        return std::fs::read_dir(dir).map(|_| ());
    }
    let path = dir.join(name);
    let data: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(31) ^ std::process::id()) as u8)
        .collect();
    let result = (|| {
        let mut f = std::fs::File::create(&path)?;
        f.write_all(&data)?;
        f.sync_all()?;
        let mut back = Vec::with_capacity(data.len());
        std::fs::File::open(&path)?.read_to_end(&mut back)?;
        if back != data {
            return Err(std::io::Error::other(
                "read back different bytes than written",
            ));
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// Runs node checks under a deadline, one at a time per volume.
pub struct NodeChecker {
    timeout: Duration,
    slow: Duration,
    /// How long a fast, successful I/O probe of a volume's path stands for the next ones.
    probe_interval: Duration,
    in_flight: Arc<Mutex<HashMap<String, Instant>>>,
    /// Volume → the path of its last fast, successful I/O probe, and when it ran.
    passed: Arc<Mutex<HashMap<String, (PathBuf, Instant)>>>,
}

/// Entries of `passed` beyond which the stale ones are dropped.
const PASSED_PRUNE_AT: usize = 4096;

/// Whether a fast success of `path`, recorded as `entry`, still stands at `now`.
fn still_passes(entry: Option<&(PathBuf, Instant)>, path: &Path, interval: Duration) -> bool {
    entry.is_some_and(|(p, at)| p == path && at.elapsed() < interval)
}

impl NodeChecker {
    /// A checker with a deadline and a slow threshold that probes on every check.
    pub fn new(timeout: Duration, slow: Duration) -> Self {
        NodeChecker::with_probe_interval(timeout, slow, Duration::ZERO)
    }

    /// A checker whose fast, successful I/O probe of a volume stands for `probe_interval`:
    /// checks in between still look at every path, but write and sync nothing. A failed or slow
    /// probe stands for nothing, so the next check probes again and sees a recovery at once.
    pub fn with_probe_interval(
        timeout: Duration,
        slow: Duration,
        probe_interval: Duration,
    ) -> Self {
        NodeChecker {
            timeout,
            slow,
            probe_interval,
            in_flight: Arc::default(),
            passed: Arc::default(),
        }
    }

    /// Checks one volume; never takes longer than the deadline.
    pub async fn check(&self, input: NodeCheckInput) -> Vec<Condition> {
        let id = input.volume_id.clone();
        {
            let mut map = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(started) = map.get(&id) {
                return vec![inaccessible(
                    "IoProbeHung",
                    format!(
                        "an earlier check started {} ms ago has not returned",
                        started.elapsed().as_millis()
                    ),
                )];
            }
            map.insert(id.clone(), Instant::now());
        }
        let in_flight = self.in_flight.clone();
        let passed = self.passed.clone();
        let slow = self.slow;
        let interval = self.probe_interval;
        let task = tokio::task::spawn_blocking(move || {
            let (mut out, probe) = check_paths(&input, &crate::mounts::mount_points());
            let lock = || passed.lock().unwrap_or_else(|p| p.into_inner());
            let probe = probe
                .filter(|(path, _)| !still_passes(lock().get(&input.volume_id), path, interval));
            if let Some((path, readonly)) = probe {
                let started = Instant::now();
                let res = io_probe(&path, readonly, &input.probe_name);
                let took = started.elapsed();
                {
                    let mut passed = lock();
                    if res.is_ok() && took < slow && !interval.is_zero() {
                        if passed.len() >= PASSED_PRUNE_AT {
                            passed.retain(|_, (_, at)| at.elapsed() < interval);
                        }
                        passed.insert(input.volume_id.clone(), (path.clone(), Instant::now()));
                    } else {
                        passed.remove(&input.volume_id);
                    }
                }
                match res {
                    Err(e) => out.push(inaccessible("IoProbeFailed", format!("I/O probe in {}: {e}", path.display()))),
                    Ok(()) if took >= slow => out.push(Condition::new(
                        volume_status::DEGRADED,
                        "SlowIo",
                        format!(
                            "writing and reading back 4096 bytes in {} took {} ms (slow above {} ms)",
                            path.display(),
                            took.as_millis(),
                            slow.as_millis()
                        ),
                    )),
                    Ok(()) => {}
                }
            }
            in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&input.volume_id);
            out
        });
        match tokio::time::timeout(self.timeout, task).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => vec![inaccessible(
                "IoProbeFailed",
                format!("the check task failed: {e}"),
            )],
            Err(_) => vec![inaccessible(
                "IoProbeTimedOut",
                format!(
                    "checking the volume's paths and I/O took longer than {} ms",
                    self.timeout.as_millis()
                ),
            )],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn input(attempts: Attempts, data: &Path) -> NodeCheckInput {
        NodeCheckInput {
            volume_id: "vh-1".into(),
            attempts: Some(attempts),
            data_path: Some(data.to_path_buf()),
            publish_path: String::new(),
            staging_path: String::new(),
            probe_name: ".probe".into(),
        }
    }

    #[test]
    fn bind_attempt_needs_a_mount_point_and_symlink_needs_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let staged = dir.path().join("staged");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&staged).unwrap();
        let stage = PathAttempt {
            path: staged.display().to_string(),
            source: data.display().to_string(),
            method: Some(MountMethod::Bind),
            readonly: false,
            error: None,
        };
        let a = Attempts {
            volume_id: "vh-1".into(),
            stage: Some(stage.clone()),
            publishes: BTreeMap::new(),
        };
        let (c, probe) = check_paths(&input(a.clone(), &data), &HashSet::new());
        assert_eq!(c[0].reason, "StagingPathNotMounted");
        assert!(probe.is_none(), "no probe through a path known to be wrong");
        let mounted: HashSet<PathBuf> = [std::fs::canonicalize(&staged).unwrap()].into();
        let (c, probe) = check_paths(&input(a, &data), &mounted);
        assert!(c.is_empty(), "{c:?}");
        assert_eq!(probe, Some((staged.clone(), false)));

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&data, &link).unwrap();
        let linked = PathAttempt {
            path: link.display().to_string(),
            method: Some(MountMethod::Symlink),
            ..stage
        };
        let a = Attempts {
            volume_id: "vh-1".into(),
            stage: Some(linked),
            publishes: BTreeMap::new(),
        };
        assert!(
            check_paths(&input(a.clone(), &data), &HashSet::new())
                .0
                .is_empty()
        );
        std::fs::remove_dir_all(&data).unwrap();
        let (c, _) = check_paths(&input(a, &data), &HashSet::new());
        assert_eq!(c[0].reason, "BackingDataMissing");
    }

    #[test]
    fn probe_writes_reads_back_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        io_probe(dir.path(), false, ".probe").unwrap();
        assert!(!dir.path().join(".probe").exists());
        assert!(io_probe(&dir.path().join("missing"), false, ".probe").is_err());
    }

    fn published(dir: &Path) -> NodeCheckInput {
        NodeCheckInput {
            volume_id: "vh-1".into(),
            attempts: None,
            data_path: None,
            publish_path: dir.display().to_string(),
            staging_path: String::new(),
            probe_name: ".probe".into(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_passed_probe_stands_for_its_interval_and_a_failed_one_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let input = published(dir.path());
        // A directory where the probe file goes makes every real probe fail.
        let block = || std::fs::create_dir(dir.path().join(".probe")).unwrap();
        let unblock = || std::fs::remove_dir(dir.path().join(".probe")).unwrap();
        let reasons = |c: Vec<Condition>| c.into_iter().map(|c| c.reason).collect::<Vec<_>>();
        let hour = Duration::from_secs(3600);

        let cached = NodeChecker::with_probe_interval(hour, hour, hour);
        assert!(cached.check(input.clone()).await.is_empty());
        block();
        assert!(
            cached.check(input.clone()).await.is_empty(),
            "within the interval the passed probe stands: nothing is written"
        );
        let mut moved = input.clone();
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir(other.path().join(".probe")).unwrap();
        moved.publish_path = other.path().display().to_string();
        assert_eq!(
            reasons(cached.check(moved).await),
            ["IoProbeFailed"],
            "a passed probe stands only for the path it probed"
        );

        let every = NodeChecker::new(hour, hour);
        assert_eq!(reasons(every.check(input.clone()).await), ["IoProbeFailed"]);
        assert_eq!(reasons(every.check(input.clone()).await), ["IoProbeFailed"]);

        let fresh = NodeChecker::with_probe_interval(hour, hour, hour);
        assert_eq!(reasons(fresh.check(input.clone()).await), ["IoProbeFailed"]);
        unblock();
        assert!(
            fresh.check(input.clone()).await.is_empty(),
            "a failed probe stands for nothing: the recovery is seen at once"
        );
        block();
        assert!(
            fresh.check(input.clone()).await.is_empty(),
            "the passed one stands"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_probe_stands_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let input = published(dir.path());
        let hour = Duration::from_secs(3600);
        // Every probe counts as slow with a zero threshold.
        let checker = NodeChecker::with_probe_interval(hour, Duration::ZERO, hour);
        for _ in 0..2 {
            let got = checker.check(input.clone()).await;
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].reason, "SlowIo", "probed again: {got:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hung_probe_times_out_and_is_not_started_twice() {
        // The probe file is a FIFO: opening it for writing blocks until a reader comes, as I/O
        // on a hung filesystem would.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(".probe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let checker = NodeChecker::new(Duration::from_millis(100), Duration::from_secs(1));
        let input = NodeCheckInput {
            volume_id: "vh-1".into(),
            attempts: None,
            data_path: None,
            publish_path: dir.path().display().to_string(),
            staging_path: String::new(),
            probe_name: ".probe".into(),
        };
        let first = checker.check(input.clone()).await;
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].reason, "IoProbeTimedOut");
        let second = checker.check(input.clone()).await;
        assert_eq!(second[0].reason, "IoProbeHung");
        // Release the stuck thread: a reader lets the write finish, then the probe fails on read-back.
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = std::fs::File::open(&fifo)
                .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut buf));
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while checker.in_flight.lock().unwrap().contains_key("vh-1") {
            assert!(Instant::now() < deadline, "the stuck probe never returned");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = reader.join();
    }
}
