//! The health proxy (run in this process) in front of the reference driver speaking only the
//! legacy VOLUME_CONDITION, called by a client nobody here wrote: Python `grpcio` (gRPC C-core,
//! default options, the socket path as `:authority`), driven by
//! `tests/python/grpcio_health_proxy.py`. Skipped when grpcio is missing, failed instead under
//! VOLHEALTH_REQUIRE_TOOLS=1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use support::RunningProxy;
use volhealth_driver::HealthCapabilities;
use volhealth_driver::config::DEFAULT_DRIVER_NAME;
use volhealth_testkit::{Driver, run_grpcio_script};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_gets_health_from_a_legacy_driver_through_the_proxy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let driver_socket = dir.path().join("csi.sock");
    let proxy_socket = dir.path().join("health.sock");
    // As `volhealth driver --health-api legacy`: the legacy condition, no health RPCs.
    let driver = Driver::start_configured(dir.path(), DEFAULT_DRIVER_NAME, "node-a", |c| {
        c.health = HealthCapabilities::NONE;
        c.legacy_condition = true;
    })
    .await;
    let proxy = RunningProxy::start(
        &driver_socket,
        proxy_socket.clone(),
        Some(dir.path().join("proxy-state")),
    )
    .await;
    let staging = dir.path().join("kubelet/plugins/globalmount");
    std::fs::create_dir_all(staging.parent().unwrap()).unwrap();
    if !run_grpcio_script("grpcio_health_proxy.py", &[&proxy_socket, &staging]).await {
        return;
    }
    proxy.stop().await;
    driver.stop().expect("the driver stops cleanly");
}
