//! End to end: `volhealth monitor --health-secret NS/NAME` reads the Secret from the API server
//! and passes its data as `secrets` in the controller health RPCs. The driver runs with
//! `--require-secret-file`, so conditions reach the claim only when the Secret holds the right value;
//! with a wrong value every cycle fails and stored conditions stay; a Secret rotated under the
//! running monitor is used from the next call on; a value the driver echoes in its error text is
//! redacted. A missing Secret stops the monitor with an error naming it, before any probe, and
//! no Secret value appears in any log.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod monitor_world;
mod support;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use monitor_world::{NS, WAIT, World};
use serde_json::json;
use volhealth_testkit::b64;

const KEY: &str = "apikey";
const RIGHT: &str = "right-Vb7Qm2Xs9";
const WRONG: &str = "wrong-Tk4Jp8Ln3";

async fn put_secret(world: &World, name: &str, value: &str) {
    let secrets = Api::<Secret>::namespaced(world.admin.clone(), NS);
    let body = json!({"metadata": {"name": name}, "stringData": {KEY: value, "unused": "x"}});
    if secrets.get_opt(name).await.expect("get secret").is_some() {
        secrets
            .patch(name, &PatchParams::default(), &Patch::Merge(body))
            .await
            .expect("update secret");
    } else {
        let s: Secret = serde_json::from_value(body).unwrap();
        secrets
            .create(&PostParams::default(), &s)
            .await
            .expect("create secret");
    }
}

/// Stores a condition on a claim as if an earlier monitor had reported it.
async fn seed_condition(world: &World, claim: &str, status: &str, reason: &str) {
    let body = json!({"status": {"healthStatus": {"healthConditions": [{"status": status, "reason": reason, "message": "seeded"}]}}});
    Api::<PersistentVolumeClaim>::namespaced(world.admin.clone(), NS)
        .patch_status(claim, &PatchParams::default(), &Patch::Merge(body))
        .await
        .expect("seed condition");
}

fn assert_no_secret_in_logs(world: &World, values: &[&str]) {
    let mut seen = 0;
    for entry in std::fs::read_dir(world.dir.path()).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        seen += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        for v in values {
            assert!(!text.contains(v), "{v} appears in {}", path.display());
            assert!(
                !text.contains(&b64(v)),
                "base64 of {v} appears in {}",
                path.display()
            );
        }
    }
    assert!(
        seen >= 3,
        "expected the apiserver, driver and monitor logs, found {seen}"
    );
}

async fn failed_probes(monitor: &monitor_world::Monitor) -> f64 {
    monitor
        .metric("csi_volume_health_probe_total", &[r#"result="error""#])
        .await
}

async fn secret_gates_health_reports(caps: &str) {
    let mut world = World::start(caps).await;
    let required = world.dir.path().join("required-secret");
    std::fs::write(&required, format!("{KEY}={RIGHT}\n")).unwrap();
    world.restart_driver_with(&["--require-secret-file", required.to_str().unwrap()]);
    let sick = world.bound_claim("sick").await;
    world.bound_claim("stale").await;
    world.inject_condition(&sick, "Inaccessible", "PathGone");
    seed_condition(&world, "stale", "Degraded", "OldNews").await;
    let secret_ref = format!("{NS}/health-creds");

    // Wrong value: the driver refuses every health RPC; nothing appears, nothing is cleared.
    put_secret(&world, "health-creds", WRONG).await;
    let monitor = world
        .start_monitor("monitor-wrong", &["--health-secret", &secret_ref])
        .await;
    support::wait_for_async(WAIT, "refused health RPCs", || async {
        (failed_probes(&monitor).await >= 3.0).then_some(())
    })
    .await;
    assert_eq!(
        monitor.successful_probes().await,
        0.0,
        "the driver must refuse the wrong secret"
    );
    assert!(
        world.conditions("sick").await.is_empty(),
        "no report without the right secret"
    );
    assert_eq!(
        world.conditions("stale").await,
        [("Degraded".to_string(), "OldNews".to_string())],
        "a failed cycle clears nothing"
    );
    let log = std::fs::read_to_string(&monitor.log).unwrap();
    assert!(
        log.contains("Unauthenticated") && log.contains(&format!("{KEY:?}")),
        "the refusal is logged with the key: {log}"
    );

    // The Secret is rotated under the running monitor: the next calls carry the new value, the
    // condition appears and the stale one clears, with no restart.
    put_secret(&world, "health-creds", RIGHT).await;
    world
        .wait_conditions("sick", &[("Inaccessible", "PathGone")])
        .await;
    world.wait_conditions("stale", &[]).await;
    assert!(monitor.successful_probes().await > 0.0);

    // A driver that echoes the credential in its error text: the value is redacted from the
    // monitor's log, the rest of the message is kept, and nothing is cleared.
    let before = failed_probes(&monitor).await;
    for method in ["ControllerListVolumeHealth", "ControllerGetVolumeHealth"] {
        world.inject(&[
            "rpc",
            method,
            "--code",
            "UNAVAILABLE",
            "--message",
            &format!("array login {KEY}={RIGHT} timed out"),
        ]);
    }
    support::wait_for_async(WAIT, "the echoing failure to be logged", || async {
        let log = std::fs::read_to_string(&monitor.log).unwrap_or_default();
        (failed_probes(&monitor).await > before
            && log.contains(&format!("array login {KEY}=[redacted] timed out")))
        .then_some(())
    })
    .await;
    assert_eq!(
        world.conditions("sick").await,
        [("Inaccessible".to_string(), "PathGone".to_string())],
        "a failed cycle clears nothing"
    );
    for method in ["ControllerListVolumeHealth", "ControllerGetVolumeHealth"] {
        world.inject(&["clear", "rpc", method]);
    }
    drop(monitor);

    assert_no_secret_in_logs(&world, &[RIGHT, WRONG]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_secret_reaches_list_rpc() {
    secret_gates_health_reports("list,get").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_secret_reaches_get_rpc() {
    secret_gates_health_reports("get").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_health_secret_is_a_clear_error_and_clears_nothing() {
    let mut world = World::start("list,get").await;
    let required = world.dir.path().join("required-secret");
    std::fs::write(&required, format!("{KEY}={RIGHT}\n")).unwrap();
    world.restart_driver_with(&["--require-secret-file", required.to_str().unwrap()]);
    world.bound_claim("stale").await;
    seed_condition(&world, "stale", "Degraded", "OldNews").await;

    let mut monitor =
        world.spawn_monitor("monitor-missing", &["--health-secret", "default/absent"]);
    let log_path = world.dir.path().join("monitor-missing.log");
    // Without its Secret the monitor must not probe at all: it stops with an error naming it.
    let code = support::wait_for(WAIT, "the monitor to stop without its secret", || {
        monitor.child.try_wait().ok().flatten()
    });
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(!code.success(), "a missing health secret is fatal: {log}");
    assert!(
        log.contains("reading the health secret default/absent") && log.contains("not found"),
        "{log}"
    );
    assert_eq!(
        world.conditions("stale").await,
        [("Degraded".to_string(), "OldNews".to_string())],
        "no false clear"
    );
    monitor.kill();
    assert_no_secret_in_logs(&world, &[RIGHT]);
}
