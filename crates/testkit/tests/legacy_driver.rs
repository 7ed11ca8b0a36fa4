//! A driver that speaks only the legacy VOLUME_CONDITION shape (the reference driver with
//! `--health-api legacy`): both writers probe it through the bridge, and its conditions reach
//! pvc.status.healthStatus and pod.status.volumeHealth and clear on recovery. A failed answer
//! clears nothing, and a message whose timestamp changes on every poll writes once. The same
//! conditions reach both objects through `health-proxy` to writers that know only the v1.13
//! RPCs (their own bridge off), as the kubelet and the upstream sidecar would be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use support::{Seen, claim, free_addr, more_cycles, pod};
use volhealth_driver::HealthCapabilities;
use volhealth_driver::condition::volume_status;
use volhealth_driver::injection::Side;
use volhealth_legacy_bridge::Rules;
use volhealth_testkit::{
    NodeWorld, Service, agent_config, monitor_config, run_agent, run_monitor, wait_for,
};

const DRIVER: &str = "hostpath.volhealth.io";
const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(40);
/// gRPC UNAVAILABLE.
const UNAVAILABLE: i32 = 14;

/// Waits until the claim shows `on_claim` and the pod `on_pod` (both empty: cleared).
async fn wait_both(admin: &kube::Client, what: &str, on_claim: Seen, on_pod: Seen) {
    wait_for(WAIT, what, || async {
        let (c, _) = claim(admin).await?;
        (c == on_claim && pod(admin).await? == on_pod).then_some(())
    })
    .await;
}

/// Injects the driver's fault on both sides of the volume (the node's message, `injected
/// PathGone`, maps by default) and waits until the claim shows `on_claim` and the pod the
/// node's condition.
async fn inject_both_sides(w: &NodeWorld, what: &str, on_claim: Seen) {
    w.driver.inject_both_sides(&w.volume);
    let on_pod = seen("Degraded", "VolumeConditionAbnormal", "injected PathGone");
    wait_both(&w.admin, what, on_claim, on_pod).await;
}

fn seen(status: &str, reason: &str, message: &str) -> Seen {
    vec![(status.into(), reason.into(), message.into())]
}

/// Starts the monitor and the node agent in-process against `endpoint` (the driver's socket, or a
/// proxy's), every second, with `legacy` as both writers' bridge settings.
fn start_writers(
    w: &NodeWorld,
    endpoint: &str,
    legacy: volhealth_legacy_bridge::Settings,
) -> (Service, Service, [SocketAddr; 2]) {
    let (monitor_http, agent_http) = (free_addr(), free_addr());
    let mut monitor_config = monitor_config(
        endpoint,
        w.api
            .token_kubeconfig(w.dir.path(), "monitor", "monitortok"),
        Some(monitor_http),
    );
    monitor_config.legacy = legacy.clone();
    let monitor = run_monitor("monitor", monitor_config);
    let mut agent_config = agent_config(
        NODE,
        w.api.token_kubeconfig(w.dir.path(), "node", "nodetok"),
        &w.root,
        DRIVER,
        endpoint,
        Some(agent_http),
    );
    agent_config.legacy = legacy;
    let agent = run_agent("agent", agent_config);
    (monitor, agent, [monitor_http, agent_http])
}

/// A world whose driver speaks only the legacy VOLUME_CONDITION shape.
async fn legacy_world() -> NodeWorld {
    NodeWorld::with_driver(DRIVER, NODE, |c| {
        c.health = HealthCapabilities::NONE;
        c.legacy_condition = true;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_of_a_legacy_only_driver_reach_claim_and_pod_and_clear() {
    let w = legacy_world().await;
    let mine = Rules::parse(
        "rules:\n- match: \"injected SlowDisk\"\n  status: Inaccessible\n  reason: SlowDisk\n",
    )
    .unwrap();
    let legacy = volhealth_legacy_bridge::Settings {
        rules: Arc::new(mine.then(Rules::shipped().unwrap())),
        ..Default::default()
    };
    let (monitor, agent, writers) = start_writers(&w, &w.driver.endpoint.clone(), legacy);
    let (admin, driver, volume) = (&w.admin, &w.driver, &w.volume);

    // A user's rule maps the controller's message; the node's falls to the default mapping.
    inject_both_sides(
        &w,
        "both legacy conditions on status",
        seen("Inaccessible", "SlowDisk", "injected SlowDisk"),
    )
    .await;

    // Failed answers clear nothing: the driver recovers but every legacy call fails.
    for method in ["ListVolumes", "ControllerGetVolume", "NodeGetVolumeStats"] {
        driver.fail_method(method, UNAVAILABLE);
    }
    driver.clear_volume(volume);
    more_cycles(&writers, 3.0).await;
    assert_eq!(
        claim(admin).await.unwrap().0,
        seen("Inaccessible", "SlowDisk", "injected SlowDisk"),
        "a failed ListVolumes or ControllerGetVolume is no recovery"
    );
    assert_eq!(
        pod(admin).await.unwrap(),
        seen("Degraded", "VolumeConditionAbnormal", "injected PathGone"),
        "a failed NodeGetVolumeStats is no recovery"
    );

    // The calls answer again: both clear.
    driver.clear_faults();
    wait_both(admin, "both conditions cleared", Seen::new(), Seen::new()).await;

    // A message stamped with the time of each poll (as PowerFlex's) is written once.
    let stamped =
        |second: u32| format!("Volume is not found by controller at 2024-03-01 10:15:{second:02}");
    driver.inject_volume_message(
        volume,
        Side::Controller,
        volume_status::INACCESSIBLE,
        "Gone",
        &stamped(1),
    );
    let rv = wait_for(WAIT, "the stamped condition on the claim", || async {
        let (c, rv) = claim(admin).await?;
        (c == seen(
            "Inaccessible",
            "VolumeNotFound",
            "Volume is not found by controller at",
        ))
        .then_some(rv)
    })
    .await;
    for second in 2..6 {
        driver.inject_volume_message(
            volume,
            Side::Controller,
            volume_status::INACCESSIBLE,
            "Gone",
            &stamped(second),
        );
        more_cycles(&writers[..1], 1.0).await;
    }
    assert_eq!(
        claim(admin).await.unwrap().1,
        rv,
        "a new timestamp in the same message rewrote the claim"
    );

    assert!(!monitor.ended() && !agent.ended());
    w.stop([monitor, agent]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_health_proxy_writers_that_know_only_the_new_rpcs_see_legacy_conditions() {
    let w = legacy_world().await;
    let proxy_socket = w.dir.path().join("health.sock");
    let proxy_endpoint = format!("unix://{}", proxy_socket.display());
    let proxy_config = volhealth_health_proxy::ProxyConfig {
        csi_address: w.driver.endpoint.clone(),
        listen: proxy_endpoint.clone(),
        state_dir: Some(w.dir.path().join("proxy-state")),
        timeout: Duration::from_secs(5),
        legacy: true,
        rules: Arc::new(Rules::shipped().unwrap()),
        debounce: 2,
        node_faults: None,
    };
    let proxy = Service::start("health-proxy", move |shutdown| async move {
        volhealth_health_proxy::run(proxy_config, shutdown)
            .await
            .map_err(|e| e.to_string())
    });
    // The writers' own bridge is off: they see only what the proxy serves.
    let off = volhealth_legacy_bridge::Settings {
        enabled: false,
        ..Default::default()
    };
    let (monitor, agent, _) = start_writers(&w, &proxy_endpoint, off);
    let (admin, driver, volume) = (&w.admin, &w.driver, &w.volume);

    inject_both_sides(
        &w,
        "both legacy conditions on status through the proxy",
        seen("Degraded", "VolumeConditionAbnormal", "injected SlowDisk"),
    )
    .await;
    driver.clear_volume(volume);
    wait_both(
        admin,
        "both cleared through the proxy",
        Seen::new(),
        Seen::new(),
    )
    .await;

    assert!(!monitor.ended() && !agent.ended() && !proxy.ended());
    w.stop([monitor, agent, proxy]);
}
