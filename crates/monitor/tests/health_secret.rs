//! The monitor in this process, against the embedded API server and the reference driver over
//! real HTTP and a real unix socket, with `health_secret` (`--health-secret NS/NAME`): it reads
//! the Secret from the API server and passes its data as `secrets` in the controller health
//! RPCs. The driver requires a secret (`--require-secret-file`), so conditions reach the claim
//! only when the Secret holds the right value; with a wrong value every cycle fails and stored
//! conditions stay; a Secret rotated under the running monitor is used from the next call on; a
//! value the driver echoes in its error text is redacted. A missing Secret stops the monitor with
//! an error naming it, before any probe, and no Secret value appears in any log (each
//! component's log is caught in memory).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Monitor, NS, WAIT, World};
use volhealth_driver::DriverConfig;
use volhealth_testkit::{b64, wait_until};

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

/// Asserts that no value, nor its base64, appears in any of `logs` (name, text).
fn assert_no_secret_in_logs(logs: &[(String, String)], values: &[&str]) {
    let mut seen = 0;
    for (name, text) in logs {
        if text.is_empty() {
            continue;
        }
        seen += 1;
        for v in values {
            assert!(!text.contains(v), "{v} appears in {name}");
            assert!(!text.contains(&b64(v)), "base64 of {v} appears in {name}");
        }
    }
    assert!(
        seen >= 3,
        "expected the apiserver, driver and monitor logs, found {seen}"
    );
}

/// The driver's health RPCs refuse callers without `apikey` = [`RIGHT`] in their `secrets`.
fn require_right_secret(c: &mut DriverConfig) {
    c.require_secret = Some(format!("{KEY}={RIGHT}").parse().expect("KEY=VALUE"));
}

async fn failed_probes(monitor: &Monitor) -> f64 {
    monitor
        .metric("csi_volume_health_probe_total", &[r#"result="error""#])
        .await
}

async fn secret_gates_health_reports(caps: &str) {
    let world = World::start_with(caps, &[], require_right_secret).await;
    let sick = world.bound_claim("sick").await;
    world.bound_claim("stale").await;
    world.inject_condition(&sick, "Inaccessible", "PathGone");
    seed_condition(&world, "stale", "Degraded", "OldNews").await;
    let secret_ref = format!("{NS}/health-creds").parse().expect("NS/NAME");

    // Wrong value: the driver refuses every health RPC; nothing appears, nothing is cleared.
    put_secret(&world, "health-creds", WRONG).await;
    let monitor = world
        .start_monitor_with("monitor-wrong", |c| c.health_secret = Some(secret_ref))
        .await;
    wait_until(WAIT, "refused health RPCs", || async {
        failed_probes(&monitor).await >= 3.0
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
    let log = monitor.log.text();
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
    let echo = format!("array login {KEY}={RIGHT} timed out");
    for method in ["ControllerListVolumeHealth", "ControllerGetVolumeHealth"] {
        world.fail_rpc(method, "UNAVAILABLE", Some(&echo));
    }
    wait_until(WAIT, "the echoing failure to be logged", || async {
        failed_probes(&monitor).await > before
            && monitor
                .log
                .text()
                .contains(&format!("array login {KEY}=[redacted] timed out"))
    })
    .await;
    assert_eq!(
        world.conditions("sick").await,
        [("Inaccessible".to_string(), "PathGone".to_string())],
        "a failed cycle clears nothing"
    );
    for method in ["ControllerListVolumeHealth", "ControllerGetVolumeHealth"] {
        world.clear_rpc(method);
    }
    drop(monitor);

    assert_no_secret_in_logs(&world.logs(), &[RIGHT, WRONG]);
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
    let world = World::start_with("list,get", &[], require_right_secret).await;
    world.bound_claim("stale").await;
    seed_condition(&world, "stale", "Degraded", "OldNews").await;

    let monitor = world.spawn_monitor("monitor-missing", |c| {
        c.health_secret = Some("default/absent".parse().expect("NS/NAME"))
    });
    // Without its Secret the monitor must not probe at all: it stops with an error naming it
    // (the error `volhealth monitor` prints before it exits non-zero).
    wait_until(WAIT, "the monitor to stop without its secret", || async {
        monitor.service.ended()
    })
    .await;
    let exit = monitor.service.stop();
    assert!(exit.is_err(), "a missing health secret is fatal: {exit:?}");
    let error = exit.unwrap_err().to_string();
    assert!(
        error.contains("reading the health secret default/absent") && error.contains("not found"),
        "{error}"
    );
    assert_eq!(
        world.conditions("stale").await,
        [("Degraded".to_string(), "OldNews".to_string())],
        "no false clear"
    );
    let mut logs = world.logs();
    logs.push(("the monitor's error".to_string(), error));
    assert_no_secret_in_logs(&logs, &[RIGHT]);
}
