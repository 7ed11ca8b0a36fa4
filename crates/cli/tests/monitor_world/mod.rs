//! A world for the monitor's end-to-end tests: the embedded API server, the reference driver in
//! controller mode, and `volhealth monitor` processes, plus helpers to bind volumes to claims
//! and inject conditions. (The monitor's component tests run in-process, in its own crate.)
#![allow(dead_code)]

use crate::support::{
    self, ApiServer, Proc, quick_sidecar_flags, served_url, start_apiserver, volhealth,
    volhealth_with_env, wait_for_async,
};
use std::path::PathBuf;
use volhealth_testkit::{Claims, http_text};

use volhealth_testkit::{DRIVER, NS, WAIT};

/// API server + driver; monitors are started separately.
pub struct World {
    /// Holds logs, sockets and state.
    pub dir: tempfile::TempDir,
    /// The API server.
    pub api: ApiServer,
    /// The claims on the driver's volumes, and an admin client (`admin`).
    pub claims: Claims,
    /// The driver's state dir.
    pub state: PathBuf,
    /// The driver process.
    pub driver: Proc,
}

/// A running monitor.
pub struct Monitor {
    /// The process.
    pub proc: Proc,
}

impl World {
    /// Starts the API server and the driver (`--health-capabilities caps`, e.g. "list,get" or "get").
    pub async fn start(caps: &str) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let api = start_apiserver(dir.path(), &[]);
        let state = dir.path().join("driver-state");
        let endpoint = format!("unix://{}", dir.path().join("csi.sock").display());
        let claims = Claims::connect(&api.kubeconfig, DRIVER, &endpoint, NS, WAIT).await;
        let driver_args = [
            "driver",
            "--mode",
            "controller",
            "--endpoint",
            &endpoint,
            "--state-dir",
            state.to_str().unwrap(),
            "--node-id",
            "node-a",
            "--driver-name",
            DRIVER,
            "--health-capabilities",
            caps,
            "--refresh-interval-ms",
            "200",
            // No real LowFreeSpace of its own when the test machine's disk is nearly full: the
            // tests inject the conditions they expect.
            "--low-space-fraction",
            "0",
        ];
        let driver = volhealth("driver", dir.path(), &driver_args);
        World {
            dir,
            api,
            claims,
            state,
            driver,
        }
    }

    /// Runs `volhealth inject --state-dir STATE ARGS...`.
    pub fn inject(&self, args: &[&str]) {
        let status = std::process::Command::new(support::bin())
            .args(["inject", "--state-dir", self.state.to_str().unwrap()])
            .args(args)
            .status()
            .expect("run inject");
        assert!(status.success(), "inject {args:?} failed");
    }

    /// Injects a controller-side condition on a volume.
    pub fn inject_condition(&self, volume: &str, status: &str, reason: &str) {
        self.inject(&[
            "volume",
            volume,
            "--side",
            "controller",
            "--status",
            status,
            "--reason",
            reason,
            "--message",
            "injected by test",
        ]);
    }

    /// Starts `volhealth monitor` named `name` with `extra` flags (the monitor's debug log on),
    /// without waiting for anything.
    pub fn spawn_monitor(&self, name: &str, extra: &[&str]) -> Proc {
        let kc = self.api.kubeconfig.to_str().unwrap().to_string();
        let mut args = vec![
            "monitor",
            "--csi-address",
            &self.endpoint,
            "--kubeconfig",
            &kc,
        ];
        args.extend(quick_sidecar_flags("--monitor-interval", extra));
        volhealth_with_env(
            name,
            self.dir.path(),
            &args,
            &[("RUST_LOG", "info,volhealth_monitor=debug")],
        )
    }

    /// Starts `volhealth monitor` named `name` with `extra` flags, waits for /readyz.
    pub async fn start_monitor(&self, name: &str, extra: &[&str]) -> Monitor {
        let mut proc = self.spawn_monitor(name, extra);
        let base = served_url(&mut proc, WAIT);
        let ready = format!("{base}/readyz");
        wait_for_async(WAIT, &format!("{name} to be ready"), || async {
            http_text(&ready).await.map(|_| ())
        })
        .await;
        Monitor { proc }
    }
}

/// The claims: `bound_claim`, `conditions`, `wait_conditions`, `wait_event`, `admin`.
impl std::ops::Deref for World {
    type Target = Claims;
    fn deref(&self) -> &Claims {
        &self.claims
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // The temp dir goes away with the world: show the logs of a failed test first.
        if !std::thread::panicking() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "log") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(60).collect();
                eprintln!("==== {} (last {} lines)", path.display(), tail.len());
                for line in tail.into_iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
    }
}
