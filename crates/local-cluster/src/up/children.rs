//! The components `up` runs, each a child process of this same binary with its output in its own
//! log file: a crash stays in one component and its log, and shutdown order is explicit.

use crate::failure::Context as _;
use crate::failure::{Result, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// How long a component gets to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// One running component.
pub struct Component {
    /// Short name, e.g. `driver-node-1`.
    pub name: String,
    /// Its log file.
    pub log: PathBuf,
    /// The length of the log when this run of the component started (a log is appended to).
    log_start: u64,
    child: Child,
}

impl Component {
    /// Starts `volhealth ARGS...` with output appended to `log`. The child gets its own process
    /// group, so a terminal's Ctrl-C reaches only `up`, which then stops everything in order.
    /// The agent and the monitor run from their single-component binaries when those sit beside
    /// this one (as `cargo build` and the image put them), so they are what gets run and measured.
    pub fn start(name: &str, log: &Path, args: &[String]) -> Result<Component> {
        let own = own_executable()?;
        let (exe, args) = match args.split_first() {
            Some((sub, rest)) => match single_binary(&own, sub) {
                Some(single) => (single, rest),
                None => (own, args),
            },
            None => (own, args),
        };
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let err = out
            .try_clone()
            .with_context(|| format!("opening {}", log.display()))?;
        let log_start = out
            .metadata()
            .with_context(|| format!("reading {}", log.display()))?
            .len();
        let child = Command::new(&exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {name} ({} {})", exe.display(), args.join(" ")))?;
        Ok(Component {
            name: name.to_string(),
            log: log.to_path_buf(),
            log_start,
            child,
        })
    }

    /// The address its metrics endpoint bound, read from what it logged since it started;
    /// fails when it exits first or says nothing within `wait`.
    pub async fn bound_http(&mut self, wait: Duration) -> Result<std::net::SocketAddr> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let text = std::fs::read(&self.log).unwrap_or_default();
            let start = usize::try_from(self.log_start)
                .unwrap_or(usize::MAX)
                .min(text.len());
            if let Some(addr) = bound_address(&String::from_utf8_lossy(&text[start..])) {
                return Ok(addr);
            }
            if let Some(why) = self.exited() {
                bail!("{why}");
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "{} did not report the address of its metrics endpoint within {wait:?}; last lines of {}:\n{}",
                    self.name,
                    self.log.display(),
                    tail(&self.log, 12)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The process id (None once reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// `Some(message)` when the process has exited, with the end of its log.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "{} exited ({status}); last lines of {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 12)
            )),
            Ok(None) => None,
            Err(e) => Some(format!("{}: cannot check the process: {e}", self.name)),
        }
    }

    /// SIGTERM, then SIGKILL after a grace period.
    pub async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
            if tokio::time::timeout(STOP_GRACE, self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
            let _ = self.child.kill().await;
        }
    }
}

/// The components of one cluster, in start order; stopped last started first.
#[derive(Default)]
pub struct Processes {
    started: Vec<Component>,
}

impl Processes {
    /// Starts `volhealth ARGS...` as `name` (see [`Component::start`]).
    pub fn start(&mut self, name: &str, log: &Path, args: &[String]) -> Result<()> {
        self.started.push(Component::start(name, log, args)?);
        Ok(())
    }

    /// Adds a component started by the caller.
    pub fn push(&mut self, component: Component) {
        self.started.push(component);
    }

    /// Takes out the component called `name`, to stop or replace it.
    pub fn remove(&mut self, name: &str) -> Option<Component> {
        let pos = self.started.iter().position(|c| c.name == name)?;
        Some(self.started.remove(pos))
    }

    /// The component started last.
    pub fn last_mut(&mut self) -> Option<&mut Component> {
        self.started.last_mut()
    }

    /// Every component, in start order.
    pub fn iter(&self) -> std::slice::Iter<'_, Component> {
        self.started.iter()
    }

    /// Every component, in start order, to learn what they bound.
    pub fn as_mut_slice(&mut self) -> &mut [Component] {
        &mut self.started
    }

    /// The first component that has exited, described.
    pub fn exited(&mut self) -> Option<String> {
        self.started.iter_mut().find_map(Component::exited)
    }

    /// The pid of the component called `name`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.started
            .iter()
            .find(|c| c.name == name)
            .and_then(Component::pid)
    }

    /// Names and pids of the components still running, in start order.
    pub fn pids(&self) -> impl Iterator<Item = (String, u32)> + '_ {
        self.started
            .iter()
            .filter_map(|c| Some((c.name.clone(), c.pid()?)))
    }

    /// Stops every component, last started first.
    pub async fn stop_all(&mut self) {
        while let Some(mut c) = self.started.pop() {
            c.stop().await;
        }
    }
}

/// This binary's path. When it was replaced on disk while running (a rebuild), Linux reports the
/// old file as `<path> (deleted)`; the components are then started from the new file at `<path>`.
/// The subcommands built also as binaries of their own, `volhealth-SUBCOMMAND`.
const SINGLE_BINARIES: [&str; 2] = ["agent", "monitor"];

/// `volhealth-SUBCOMMAND` beside `own`, when `subcommand` has one and it was built.
fn single_binary(own: &Path, subcommand: &str) -> Option<PathBuf> {
    if !SINGLE_BINARIES.contains(&subcommand) {
        return None;
    }
    let path = own.with_file_name(format!("volhealth-{subcommand}"));
    path.is_file().then_some(path)
}

fn own_executable() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding the volhealth executable")?;
    if exe.exists() {
        return Ok(exe);
    }
    let text = exe.display().to_string();
    match text.strip_suffix(" (deleted)") {
        Some(path) if Path::new(path).exists() => Ok(PathBuf::from(path)),
        _ => bail!("the volhealth executable {text} no longer exists"),
    }
}

/// The last `n` lines of a file, indented, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..]
        .iter()
        .map(|l| format!("    {l}\n"))
        .collect()
}

/// Stops leftovers of an earlier `up` on this dir that was killed before it could clean up:
/// only recorded pids whose command line is this binary running with a path inside `dir`. All
/// are sent SIGTERM at once and waited for together (SIGKILL after the grace period), so a
/// dozen leftovers take one grace period, not twelve.
pub async fn stop_leftovers(
    pids: &std::collections::BTreeMap<String, u32>,
    dir: &Path,
) -> Vec<String> {
    let marker = dir.as_os_str().as_encoded_bytes().to_vec();
    let ours: Vec<(&String, u32)> = pids
        .iter()
        .filter(|(_, pid)| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .windows(marker.len())
                    .any(|w| w == marker.as_slice())
            })
        })
        .map(|(name, pid)| (name, *pid))
        .collect();
    if ours.is_empty() {
        return Vec::new();
    }
    let names: Vec<String> = ours
        .iter()
        .map(|(name, pid)| format!("{name} (pid {pid})"))
        .collect();
    println!(
        "  an earlier run was killed; stopping its {} leftover component(s): {}",
        names.len(),
        names.join(", ")
    );
    for (_, pid) in &ours {
        let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGTERM);
    }
    let alive = |pid: u32| Path::new(&format!("/proc/{pid}")).exists();
    let deadline = tokio::time::Instant::now() + STOP_GRACE;
    while ours.iter().any(|(_, p)| alive(*p)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (name, pid) in &ours {
        if alive(*pid) {
            println!("  {name} (pid {pid}) ignored SIGTERM for {STOP_GRACE:?}; killing it");
            let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
        }
    }
    names
}

/// The address in the line a component's endpoint server logs once it is bound
/// ("serving /metrics, /healthz and /readyz on http://ADDR").
pub fn bound_address(log: &str) -> Option<std::net::SocketAddr> {
    log.lines().find_map(|line| {
        let rest = line.split_once("/readyz on http://")?.1;
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '[' | ']')))
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn leftovers_are_only_processes_that_name_the_dir() {
        // This test process is alive but its command line does not name the dir: never touched.
        let me = std::process::id();
        let pids = std::collections::BTreeMap::from([
            ("apiserver".to_string(), me),
            ("gone".to_string(), u32::MAX),
        ]);
        let stopped = stop_leftovers(&pids, Path::new("/nonexistent/volhealth-test-dir")).await;
        assert!(stopped.is_empty(), "{stopped:?}");
    }

    #[test]
    fn only_the_sidecars_run_from_their_own_binaries_and_only_when_built() {
        let tmp = tempfile::tempdir().unwrap();
        let own = tmp.path().join("volhealth");
        std::fs::write(&own, "").unwrap();
        assert_eq!(single_binary(&own, "agent"), None, "not built yet");
        for name in ["volhealth-agent", "volhealth-monitor", "volhealth-driver"] {
            std::fs::write(tmp.path().join(name), "").unwrap();
        }
        assert_eq!(
            single_binary(&own, "agent"),
            Some(tmp.path().join("volhealth-agent"))
        );
        assert_eq!(
            single_binary(&own, "monitor"),
            Some(tmp.path().join("volhealth-monitor"))
        );
        assert_eq!(single_binary(&own, "driver"), None, "not a single binary");
        assert_eq!(single_binary(&own, "--help"), None);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("x.log");
        std::fs::write(&log, "a\nb\nc\n").unwrap();
        assert_eq!(tail(&log, 2), "    b\n    c\n");
        assert_eq!(tail(&tmp.path().join("missing"), 2), "");
    }

    #[test]
    fn the_bound_address_is_read_from_the_components_log() {
        let log = "2026-12-04T23:20:00.136558Z  INFO volhealth_daemon::endpoint_server: serving /metrics, /healthz and /readyz on http://127.0.0.1:27938\n";
        assert_eq!(
            bound_address(&format!("earlier line\n{log}later line")),
            Some("127.0.0.1:27938".parse().unwrap())
        );
        assert_eq!(
            bound_address("serving /m, /healthz and /readyz on http://[::1]:9\n"),
            Some("[::1]:9".parse().unwrap())
        );
        assert_eq!(bound_address("starting the driver\n"), None);
        assert_eq!(bound_address("/readyz on http://not-an-address\n"), None);
    }
}
