//! `volhealth-monitor` as a drop-in for csi-external-health-monitor-controller: started with the
//! exact container args of the upstream example Deployment, of csi-driver-host-path, and with
//! every flag of the upstream v0.18 and v0.19 spelt as Go takes them (fixtures in
//! `tests/fixtures/upstream-args/`), it starts, answers the upstream liveness probe
//! `/healthz/leader-election`, becomes ready and writes a claim's health.
//!
//! Two things a pod has that a test does not are added to every list: `--kubeconfig` (a pod uses
//! its service account), and, where a manifest serves no HTTP endpoint, `--http-endpoint` on a
//! free port, because volhealth serves `:8080` by default and tests run side by side.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod monitor_world;
mod support;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use monitor_world::World;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{free_port, wait_for_async};

/// The fixture's args, with `$(ADDRESS)` expanded and `:8080` moved to a free port.
fn fixture_args(name: &str, address: &str, port: u16) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/upstream-args")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            l.replace("$(ADDRESS)", address)
                .replace("=:8080", &format!("=127.0.0.1:{port}"))
        })
        .collect()
}

/// The sidecar process, killed when the test ends.
struct Sidecar(Child);

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn get(url: &str) -> Option<u16> {
    let (code, _, _) = tokio::task::spawn_blocking({
        let url = url.to_string();
        move || support::http_get(&url, None)
    })
    .await
    .ok()??;
    Some(code)
}

/// Waits until the driver's ControllerGetVolumeHealth reports a condition for `volume`.
async fn driver_reports(endpoint: &str, volume: &str) {
    use volhealth_csi::v1;
    let channel = volhealth_csi::client::connect(endpoint, Duration::from_secs(20))
        .await
        .unwrap();
    let client = v1::controller_client::ControllerClient::new(channel);
    wait_for_async(Duration::from_secs(30), "the driver to report", || {
        let mut c = client.clone();
        async move {
            let req = v1::ControllerGetVolumeHealthRequest {
                volume_id: volume.to_string(),
                ..Default::default()
            };
            let health = c.controller_get_volume_health(req).await.ok()?;
            let statuses = health.into_inner().volume_health?.health_statuses;
            (!statuses.is_empty()).then_some(())
        }
    })
    .await;
}

/// Runs the sidecar binary with the fixture's args and checks it does the monitor's job.
async fn runs_as_the_manifest_says(fixture: &str) -> (World, String) {
    let world = World::start("list,get").await;
    let volume = world.bound_claim("data").await;
    world.inject_condition(&volume, "Inaccessible", "VolumeNotFound");
    // The driver's controller view refreshes in the background: the monitor's first cycle (at
    // its start; the next is a minute later with these args) must find the condition there.
    driver_reports(&world.endpoint, &volume).await;
    let port = free_port();
    // The manifests give a path; the upstream sidecar takes a path or a unix:// URL.
    let address = world.endpoint.trim_start_matches("unix://").to_string();
    let mut args = fixture_args(fixture, &address, port);
    assert!(
        args.iter().any(|a| a.contains(&address)),
        "{fixture}: the socket is given"
    );
    args.push(format!("--kubeconfig={}", world.api.kubeconfig.display()));
    if !args.iter().any(|a| a.contains("http-endpoint")) {
        args.push(format!("--http-endpoint=127.0.0.1:{port}"));
    }
    let log = world.dir.path().join(format!("{fixture}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let sidecar = Sidecar(
        Command::new(env!("CARGO_BIN_EXE_volhealth-monitor"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    for path in ["/healthz/leader-election", "/readyz"] {
        let url = format!("{base}{path}");
        wait_for_async(
            Duration::from_secs(60),
            &format!("{fixture}: {path} to answer 200"),
            || async { (get(&url).await == Some(200)).then_some(()) },
        )
        .await;
    }
    world
        .wait_conditions("data", &[("Inaccessible", "VolumeNotFound")])
        .await;
    drop(sidecar);
    let text = std::fs::read_to_string(&log).unwrap();
    (world, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_example_deployment_args_run_unchanged() {
    runs_as_the_manifest_says("external-health-monitor-controller.args").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_driver_host_paths_args_run_unchanged() {
    runs_as_the_manifest_says("csi-driver-host-path.args").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_flag_is_taken_the_meaningless_ones_named_once() {
    let (world, log) = runs_as_the_manifest_says("every-upstream-flag.args").await;
    // --logging-format=json: every line is a Kubernetes-shaped JSON object.
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .all(|l| l["ts"].is_f64() && l["v"].is_u64() && l["msg"].is_string()),
        "{log}"
    );
    let ignored: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| {
            l["msg"]
                .as_str()
                .is_some_and(|m| m.starts_with("ignoring flags of the upstream sidecar"))
        })
        .collect();
    assert_eq!(
        ignored.len(),
        2,
        "one line for klog's, one for the monitor's: {log}"
    );
    let named = format!("{}{}", ignored[0]["flags"], ignored[1]["flags"]);
    for flag in [
        "--enable-node-watcher",
        "--automaxprocs",
        "--list-volumes-interval",
        "--volume-list-add-interval",
        "--node-list-add-interval",
        "--resync",
        "--retry-interval-start",
        "--retry-interval-max",
        "--logtostderr",
        "--log_dir",
    ] {
        assert!(named.contains(flag), "{flag} not named: {named}");
    }
    // --leader-election-labels: on the Lease the leader holds.
    let lease = Api::<Lease>::namespaced(world.admin.clone(), "default")
        .get("external-health-monitor-leader-hostpathvolhealthio")
        .await
        .unwrap();
    let labels = lease.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("app.kubernetes.io/part-of").map(String::as_str),
        Some("csi-driver")
    );
    assert_eq!(labels.get("tier").map(String::as_str), Some("storage"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_event_reasons_raise_volume_condition_abnormal_beside_ours() {
    let world = World::start("list,get").await;
    let volume = world.bound_claim("data").await;
    let _monitor = world
        .start_monitor("monitor", &["--upstream-event-reasons"])
        .await;
    world.inject_condition(&volume, "Inaccessible", "VolumeNotFound");
    world.wait_event("data", "VolumeConditionAbnormal").await;
    let reasons = world.wait_event("data", "VolumeHealthDegraded").await;
    assert!(
        reasons.iter().any(|r| r == "VolumeConditionAbnormal"),
        "{reasons:?}"
    );
}
