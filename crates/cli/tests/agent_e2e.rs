//! End to end: `volhealth agent` with the CSIVolumeHealth gate off makes no calls and no writes,
//! and says so in its log. (What the agent reports, raises and probes is tested in-process in
//! `crates/agent/tests/registered_driver.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod agent_world;
mod support;

use agent_world::*;
use support::wait_for_async;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_with_the_gate_off_makes_no_calls_and_no_writes() {
    let w = World::start().await;
    let handle = w.mounted_pod("web").await;
    w.inject(&[
        "volume", &handle, "--side", "node", "--status", "Degraded", "--reason", "Slow",
    ]);
    let gate = ["--feature-gates", "CSIVolumeHealth=false"];
    let (_off, off_url) = w
        .start_agent_with("agent-off", "nodeatok", NODE, &gate)
        .await;
    let ready = off_url.replace("/metrics", "/readyz");
    wait_for_async(WAIT, "the gated agent ready", || async {
        let r = reqwest::get(&ready).await.ok()?;
        r.status().is_success().then_some(())
    })
    .await;
    // A witness with the gate on: by the time it has run several cycles, the gated agent would have too.
    let (_on, on_url) = w.start_agent("agent-on", "nodeatok", NODE).await;
    wait_cycles(&on_url, 3.0).await;
    let text = reqwest::get(&off_url).await.unwrap().text().await.unwrap();
    assert!(
        !text.contains("csi_volume_health_probe_total{"),
        "the gated agent called a driver:\n{text}"
    );
    assert!(
        !text.contains("csi_volume_health_status_writes_total{"),
        "the gated agent wrote:\n{text}"
    );
    let log = std::fs::read_to_string(w.dir.path().join("agent-off.log")).unwrap();
    assert!(log.contains("CSIVolumeHealth is off"), "{log}");
}
