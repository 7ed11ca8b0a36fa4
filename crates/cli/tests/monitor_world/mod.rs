//! A world for the monitor's end-to-end tests: the embedded API server, the reference driver in
//! controller mode, and `volhealth monitor` processes, plus helpers to bind volumes to claims,
//! inject faults and read both sides' metrics.
#![allow(dead_code)]

use crate::support::{self, ApiServer, Proc, start_apiserver, wait_for_async};
use k8s_openapi::api::core::v1::{Event, Namespace, PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;
use volhealth_csi::v1;

/// The driver name every world uses.
pub const DRIVER: &str = "hostpath.volhealth.io";
/// Namespace of the claims.
pub const NS: &str = "default";
/// Deadline of every wait (generous: the machine is small and shared).
pub const WAIT: Duration = Duration::from_secs(30);

/// API server + driver; monitors are started separately.
pub struct World {
    /// Holds logs, sockets and state.
    pub dir: tempfile::TempDir,
    /// The API server.
    pub api: ApiServer,
    /// An admin client.
    pub admin: kube::Client,
    /// The driver's state dir.
    pub state: PathBuf,
    /// The driver's endpoint.
    pub endpoint: String,
    /// The driver process.
    pub driver: Option<Proc>,
    driver_args: Vec<String>,
}

/// A running monitor.
pub struct Monitor {
    /// The process.
    pub proc: Proc,
    /// Its `/metrics` URL.
    pub metrics_url: String,
    /// Its log file.
    pub log: PathBuf,
}

async fn client_for(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kube config");
    kube::Client::try_from(cfg).expect("kube client")
}

fn capability() -> v1::VolumeCapability {
    v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Mount(Default::default())),
        access_mode: Some(v1::volume_capability::AccessMode {
            mode: v1::volume_capability::access_mode::Mode::SingleNodeWriter as i32,
        }),
    }
}

/// GETs `url` and returns the body (None on any failure).
pub async fn http_text(url: &str) -> Option<String> {
    let resp = reqwest::get(url).await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.text().await.ok()
}

/// Sums every sample of `name` whose label text contains all of `labels`.
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

impl World {
    /// Starts the API server and the driver (`--health-capabilities caps`, e.g. "list,get" or "get").
    pub async fn start(caps: &str) -> World {
        Self::start_with(caps, &[]).await
    }

    /// Like [`World::start`], with extra API server flags.
    pub async fn start_with(caps: &str, apiserver_flags: &[&str]) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let api = start_apiserver(dir.path(), apiserver_flags);
        let admin = client_for(&api.kubeconfig).await;
        let _ = Api::<Namespace>::all(admin.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
            )
            .await;
        let state = dir.path().join("driver-state");
        let endpoint = format!("unix://{}", dir.path().join("csi.sock").display());
        let driver_args: Vec<String> = [
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
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut w = World {
            dir,
            api,
            admin,
            state,
            endpoint,
            driver: None,
            driver_args,
        };
        w.start_driver();
        w
    }

    /// (Re)starts the driver process on the same socket and state dir.
    pub fn start_driver(&mut self) {
        let args: Vec<&str> = self.driver_args.iter().map(String::as_str).collect();
        self.driver = Some(Proc::start("driver", self.dir.path(), &args));
    }

    /// Restarts the driver with `extra` flags added to the ones it was started with.
    pub fn restart_driver_with(&mut self, extra: &[&str]) {
        self.kill_driver();
        self.driver_args.extend(extra.iter().map(|s| s.to_string()));
        self.start_driver();
    }

    /// Kills the driver process.
    pub fn kill_driver(&mut self) {
        if let Some(mut d) = self.driver.take() {
            d.kill();
        }
    }

    /// Creates a volume with the driver's CreateVolume; returns its id.
    pub async fn create_volume(&self, name: &str) -> String {
        let channel = volhealth_csi::client::connect(&self.endpoint, Duration::from_secs(20))
            .await
            .expect("connect to the driver");
        let mut c = v1::controller_client::ControllerClient::new(channel);
        let req = v1::CreateVolumeRequest {
            name: name.into(),
            volume_capabilities: vec![capability()],
            ..Default::default()
        };
        c.create_volume(req)
            .await
            .expect("CreateVolume")
            .into_inner()
            .volume
            .expect("volume")
            .volume_id
    }

    /// Creates a volume, its PV and a Bound claim `name`; returns the volume id.
    pub async fn bound_claim(&self, name: &str) -> String {
        let handle = self.pending_claim(name).await;
        self.mark_bound(name).await;
        handle
    }

    /// Creates a volume, its PV and a claim `name` on it that is still Pending; returns the volume id.
    pub async fn pending_claim(&self, name: &str) -> String {
        let handle = self.create_volume(name).await;
        let pv = format!("pv-{name}");
        let obj: PersistentVolume =
            serde_json::from_value(json!({"metadata": {"name": pv}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "csi": {"driver": DRIVER, "volumeHandle": handle},
            "claimRef": {"namespace": NS, "name": name}}}))
            .unwrap();
        Api::<PersistentVolume>::all(self.admin.clone())
            .create(&PostParams::default(), &obj)
            .await
            .expect("create PV");
        let obj: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": pv}}))
        .unwrap();
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(self.admin.clone(), NS);
        pvcs.create(&PostParams::default(), &obj)
            .await
            .expect("create PVC");
        let pending = Patch::Merge(json!({"status": {"phase": "Pending"}}));
        pvcs.patch_status(name, &PatchParams::default(), &pending)
            .await
            .expect("mark PVC Pending");
        handle
    }

    /// Marks claim `name` and its PV Bound (what the PV controller would do).
    pub async fn mark_bound(&self, name: &str) {
        let bound = Patch::Merge(json!({"status": {"phase": "Bound"}}));
        Api::<PersistentVolumeClaim>::namespaced(self.admin.clone(), NS)
            .patch_status(name, &PatchParams::default(), &bound)
            .await
            .expect("mark PVC Bound");
        Api::<PersistentVolume>::all(self.admin.clone())
            .patch_status(&format!("pv-{name}"), &PatchParams::default(), &bound)
            .await
            .expect("mark PV Bound");
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

    /// Clears a volume's injected conditions.
    pub fn clear_condition(&self, volume: &str) {
        self.inject(&["clear", "volume", volume]);
    }

    /// The (status, reason) pairs stored on the claim.
    pub async fn conditions(&self, claim: &str) -> Vec<(String, String)> {
        let pvc = Api::<PersistentVolumeClaim>::namespaced(self.admin.clone(), NS)
            .get(claim)
            .await
            .expect("get PVC");
        pvc.status
            .and_then(|s| s.health_status)
            .and_then(|h| h.health_conditions)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.status, c.reason))
            .collect()
    }

    /// Waits until the claim's conditions are exactly `want`.
    pub async fn wait_conditions(&self, claim: &str, want: &[(&str, &str)]) {
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(s, r)| (s.to_string(), r.to_string()))
            .collect();
        wait_for_async(
            WAIT,
            &format!("{claim} to have conditions {want:?}"),
            || async { (self.conditions(claim).await == want).then_some(()) },
        )
        .await;
    }

    /// Reasons of the Events on a claim.
    pub async fn event_reasons(&self, claim: &str) -> Vec<String> {
        let events = Api::<Event>::namespaced(self.admin.clone(), NS)
            .list(&ListParams::default())
            .await
            .expect("list events");
        events
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(claim))
            .filter_map(|e| e.reason)
            .collect()
    }

    /// Waits until the claim has an Event with this reason (Events are written after the
    /// status patch, so they can trail the condition by a moment).
    pub async fn wait_event(&self, claim: &str, reason: &str) -> Vec<String> {
        wait_for_async(WAIT, &format!("a {reason} event on {claim}"), || async {
            let reasons = self.event_reasons(claim).await;
            reasons.iter().any(|r| r == reason).then_some(reasons)
        })
        .await
    }

    /// PATCHes of PVC status the API server has answered.
    pub async fn status_patches(&self) -> f64 {
        let text = http_text(&format!("{}/metrics", self.api.url))
            .await
            .expect("API server /metrics");
        metric_sum(
            &text,
            "apiserver_request_total",
            &[
                r#"verb="PATCH""#,
                r#"resource="persistentvolumeclaims""#,
                r#"subresource="status""#,
            ],
        )
    }

    /// Starts `volhealth monitor` named `name` with `extra` flags, waits for /readyz.
    pub async fn start_monitor(&self, name: &str, extra: &[&str]) -> Monitor {
        let kc = self.api.kubeconfig.to_str().unwrap().to_string();
        let mut args = vec![
            "monitor",
            "--csi-address",
            &self.endpoint,
            "--kubeconfig",
            &kc,
            "--monitor-interval",
            "1s",
            "--timeout",
            "5s",
            "--http-endpoint",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        let mut proc = Proc::start_with_env(
            name,
            self.dir.path(),
            &args,
            &[("RUST_LOG", "info,volhealth_monitor=debug")],
        );
        let log = self.dir.path().join(format!("{name}.log"));
        let base = support::wait_for(WAIT, &format!("{name}'s HTTP endpoint"), || {
            assert!(proc.is_running(), "{name} exited; see {}", log.display());
            let text = std::fs::read_to_string(&log).ok()?;
            let at = text.find("http://127.0.0.1:")?;
            Some(
                text[at..]
                    .chars()
                    .take_while(|c| !c.is_whitespace())
                    .collect::<String>(),
            )
        });
        let ready = format!("{base}/readyz");
        wait_for_async(WAIT, &format!("{name} to be ready"), || async {
            http_text(&ready).await.map(|_| ())
        })
        .await;
        Monitor {
            proc,
            metrics_url: format!("{base}/metrics"),
            log,
        }
    }
}

impl Monitor {
    /// The monitor's metrics text.
    pub async fn metrics(&self) -> String {
        http_text(&self.metrics_url).await.unwrap_or_default()
    }

    /// Waits until the metrics text satisfies `ok` (metrics are updated right after the status
    /// patch is answered, so they can trail what the API server shows by a moment).
    pub async fn wait_metrics(&self, what: &str, ok: impl Fn(&str) -> bool) {
        wait_for_async(WAIT, what, || async {
            let text = self.metrics().await;
            ok(&text).then_some(())
        })
        .await;
    }

    /// Sum of the samples of `name` matching `labels`.
    pub async fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        metric_sum(&self.metrics().await, name, labels)
    }

    /// Successful probe RPCs so far (list pages or gets).
    pub async fn successful_probes(&self) -> f64 {
        self.metric("csi_volume_health_probe_total", &[r#"result="success""#])
            .await
    }

    /// Waits until at least `n` more successful probes than now happened (i.e. cycles went by).
    pub async fn wait_probes(&self, n: f64) {
        let start = self.successful_probes().await;
        wait_for_async(WAIT, &format!("{n} more successful probes"), || async {
            (self.successful_probes().await >= start + n).then_some(())
        })
        .await;
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
