//! A `volhealth up` run as a user runs it (a child process with --dir in a tempdir), and the ways
//! the end-to-end tests look at it: `volhealth inject --dir`, `volhealth status -o json` and
//! the real kubectl.
#![allow(dead_code)]

use crate::support::{Proc, bin, deep_dir, have_tool, output_ok, wait_for};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a condition gets to surface or clear (probe intervals are 1 s).
pub const SURFACE: Duration = Duration::from_secs(40);

/// A running `volhealth up`.
pub struct Cluster {
    /// Holds everything; removed on drop.
    pub tmp: tempfile::TempDir,
    /// The `--dir`.
    pub dir: PathBuf,
    /// `<dir>/kubeconfig`.
    pub kubeconfig: PathBuf,
    /// Whether kubectl checks run.
    pub kubectl: bool,
    /// More `up` flags, given on every launch.
    pub extra: Vec<String>,
    /// Where `up` runs without `--dir` (its default `.volhealth` is then `dir`), as a user runs
    /// it from a checkout; `None`: `up` gets `--dir`.
    pub checkout: Option<PathBuf>,
    proc: Option<Proc>,
}

impl Cluster {
    /// Starts `volhealth up --nodes N` on a free port with 1 s probe intervals and waits until it
    /// says it is running. The `--dir` is over 200 bytes long, as in a deep checkout, so every
    /// end-to-end test also proves that no socket path depends on the directory's depth.
    pub fn start(nodes: u16) -> Cluster {
        Cluster::start_with(nodes, &[])
    }

    /// Like [`Cluster::start`], with more `up` flags.
    pub fn start_with(nodes: u16, extra: &[&str]) -> Cluster {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = deep_dir(tmp.path()).join("state");
        Cluster::start_at(tmp, dir, None, nodes, extra)
    }

    /// Like [`Cluster::start`], run as the README runs it: in a (deep) checkout directory,
    /// without `--dir`, so its state is the default `.volhealth` there.
    pub fn start_in_checkout(nodes: u16, extra: &[&str]) -> Cluster {
        let tmp = tempfile::tempdir().expect("tempdir");
        let checkout = deep_dir(tmp.path()).join("volhealth");
        std::fs::create_dir_all(&checkout).expect("create the checkout dir");
        let dir = checkout.join(".volhealth");
        Cluster::start_at(tmp, dir, Some(checkout), nodes, extra)
    }

    fn start_at(
        tmp: tempfile::TempDir,
        dir: PathBuf,
        checkout: Option<PathBuf>,
        nodes: u16,
        extra: &[&str],
    ) -> Cluster {
        let mut cluster = Cluster {
            kubeconfig: dir.join("kubeconfig"),
            dir,
            tmp,
            kubectl: have_tool("kubectl", &["version", "--client"]),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            checkout,
            proc: None,
        };
        cluster.launch_with(nodes, &[]);
        cluster
    }

    /// Path of up's own output.
    pub fn up_log(&self) -> PathBuf {
        self.tmp.path().join("up.log")
    }

    /// Starts `up` (again) on this dir and waits for "Press Ctrl-C".
    pub fn launch(&mut self, nodes: u16) {
        self.launch_with(nodes, &[]);
    }

    /// Like [`Cluster::launch`], with extra flags for `up` for this launch only.
    pub fn launch_with(&mut self, nodes: u16, extra: &[&str]) {
        let nodes = nodes.to_string();
        let dir = self.dir.to_string_lossy().to_string();
        let mut args = vec!["up"];
        if self.checkout.is_none() {
            args.extend(["--dir", &dir]);
        }
        args.extend([
            "--nodes",
            &nodes,
            "--listen",
            "127.0.0.1:0",
            "--monitor-interval",
            "1s",
            "--agent-interval",
            "1s",
        ]);
        args.extend(self.extra.iter().map(String::as_str));
        args.extend_from_slice(extra);
        // The tests inject the conditions they expect: no real LowFreeSpace of the reference
        // driver's own when the test machine's disk is nearly full (an outside driver has none).
        if !args.contains(&"--driver-endpoint") {
            args.extend(["--low-space-fraction", "0"]);
        }
        let log = self.up_log();
        // The log is appended to across runs: only what this run writes counts.
        let before = std::fs::read_to_string(&log).map(|t| t.len()).unwrap_or(0);
        let mut proc = Proc::start(
            &bin(),
            "up",
            self.tmp.path(),
            self.checkout.as_deref(),
            &args,
            &[],
        );
        wait_for(
            Duration::from_secs(120),
            "volhealth up to be running",
            || {
                let text = std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .get(before..)
                    .unwrap_or_default()
                    .to_string();
                if text.contains("Press Ctrl-C") {
                    return Some(());
                }
                if !proc.is_running() {
                    panic!(
                        "volhealth up exited early:\n{text}\n{}",
                        self.component_logs()
                    );
                }
                None
            },
        );
        self.proc = Some(proc);
    }

    /// Every component log, for failure messages.
    pub fn component_logs(&self) -> String {
        let mut out = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.join("logs")) {
            for e in entries.flatten() {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                out.push_str(&format!("--- {}\n", e.path().display()));
                for l in tail.into_iter().rev() {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// Runs `volhealth ARGS` and returns (success, stdout, stderr).
    pub fn volhealth(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(bin())
            .args(args)
            .output()
            .expect("run volhealth");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    /// `volhealth inject --dir <dir> ARGS`, which must succeed.
    pub fn inject(&self, args: &[&str]) {
        let dir = self.dir.to_string_lossy().to_string();
        let mut all = vec!["inject", "--dir", dir.as_str()];
        all.extend_from_slice(args);
        let (ok, out, err) = self.volhealth(&all);
        assert!(ok, "volhealth {} failed:\n{out}{err}", all.join(" "));
    }

    /// Injects STATUS with REASON on claim `NAMESPACE/NAME` as `side` (controller or node)
    /// reports it: `volhealth inject pvc`, with `more` flags (say `--message TEXT`).
    pub fn inject_pvc(&self, claim: &str, side: &str, status: &str, reason: &str, more: &[&str]) {
        let mut args = vec![
            "pvc", claim, "--side", side, "--status", status, "--reason", reason,
        ];
        args.extend_from_slice(more);
        self.inject(&args);
    }

    /// Injects the storage condition STATUS with REASON into the node plugin of `node`:
    /// `volhealth inject storage`, with `more` flags (say `--access-mode ReadWriteMany`).
    pub fn inject_storage(&self, node: &str, status: &str, reason: &str, more: &[&str]) {
        let mut args = vec![
            "storage", "--node", node, "--status", status, "--reason", reason,
        ];
        args.extend_from_slice(more);
        self.inject(&args);
    }

    /// Waits until `volhealth status` shows `status` for the storage backend of `node`.
    pub fn wait_storage(&self, node: &str, status: &str) {
        self.eventually(&format!("{status} on {node}"), || {
            self.status_of("CSINode", node, "backend")
                .iter()
                .any(|s| s == status)
        });
    }

    /// The object at API `path` as the admin of `<dir>/kubeconfig` reads it (None unless 200).
    pub fn get_json(&self, path: &str) -> Option<serde_json::Value> {
        let (code, _, body) = crate::support::kube_request(
            &self.kubeconfig,
            "GET",
            path,
            Some("application/json"),
            "",
        )?;
        (code == 200).then(|| {
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
        })
    }

    /// `volhealth status -A -o json` parsed.
    pub fn status_json(&self) -> serde_json::Value {
        let kc = self.kubeconfig.to_string_lossy().to_string();
        let (ok, out, err) = self.volhealth(&["status", "--kubeconfig", &kc, "-A", "-o", "json"]);
        assert!(ok, "volhealth status failed: {err}");
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("status -o json is not JSON ({e}):\n{out}"))
    }

    /// Statuses `volhealth status` shows for (kind, name, source).
    pub fn status_of(&self, kind: &str, name: &str, source: &str) -> Vec<String> {
        let doc = self.status_json();
        let mut found: Vec<String> = doc["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["kind"] == kind && i["name"] == name && i["source"] == source)
            .filter_map(|i| i["status"].as_str().map(str::to_string))
            .collect();
        found.sort();
        found
    }

    /// `kubectl --kubeconfig <dir>/kubeconfig ARGS` (None when kubectl is not installed).
    pub fn kubectl(&self, args: &[&str]) -> Option<String> {
        if !self.kubectl {
            return None;
        }
        let out = output_ok(
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .arg("--cache-dir")
                .arg(self.tmp.path().join("kubectl-cache"))
                .args(args),
        );
        Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Waits until `check` holds, with the component logs in the failure message.
    pub fn eventually(&self, what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + SURFACE;
        loop {
            if check() {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out after {SURFACE:?} waiting for {what}\n{}",
                    self.component_logs()
                );
            }
            std::thread::park_timeout(Duration::from_millis(250));
        }
    }

    /// The up process id.
    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(|p| p.child.id())
    }

    /// Sends SIGKILL to `up` alone (its components are left running) and waits until it is gone.
    pub fn kill_up(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.kill();
        }
    }

    /// Sends SIGINT (Ctrl-C) and waits for `up` to exit; returns its exit code.
    pub fn interrupt(&mut self) -> Option<i32> {
        let mut proc = self.proc.take()?;
        let _ = kill(Pid::from_raw(proc.child.id() as i32), Signal::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = proc.child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                proc.kill();
                panic!("volhealth up did not stop within 30s of SIGINT");
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }

    /// Component pids recorded in up.json.
    pub fn recorded_pids(&self) -> Vec<u32> {
        let text = std::fs::read_to_string(self.dir.join("up.json")).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        v["pids"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, p)| p.as_u64().map(|p| p as u32))
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let pids = self.recorded_pids();
        if self.proc.is_some() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.interrupt()));
        }
        // Whatever survived (up killed before it could stop them) is ours: stop it by pid.
        for pid in pids {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let marker = self.dir.to_string_lossy().as_bytes().to_vec();
            if cmdline
                .windows(marker.len().max(1))
                .any(|w| w == marker.as_slice())
            {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
        }
    }
}
