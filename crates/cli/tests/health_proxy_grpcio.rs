//! `volhealth health-proxy` in front of `volhealth driver --health-api legacy`, called by a client
//! nobody here wrote: Python `grpcio` (gRPC C-core, default options, the socket path as
//! `:authority`), driven by `tests/python/grpcio_health_proxy.py`. Skipped when grpcio is
//! missing, failed instead under VOLHEALTH_REQUIRE_TOOLS=1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[test]
fn grpcio_gets_health_from_a_legacy_driver_through_the_proxy() {
    let python = std::env::var("VOLHEALTH_PYTHON").unwrap_or_else(|_| "python3".into());
    if !support::have_tool(&python, &["-c", "import grpc"]) {
        return;
    }
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/grpcio_health_proxy.py");
    let dir = tempfile::tempdir().expect("tempdir");
    let driver_socket = dir.path().join("csi.sock");
    let proxy_socket = dir.path().join("health.sock");
    let state = dir.path().join("state").display().to_string();
    let _driver = support::Proc::start(
        "driver",
        dir.path(),
        &[
            "driver",
            "--endpoint",
            &format!("unix://{}", driver_socket.display()),
            "--state-dir",
            &state,
            "--node-id",
            "node-a",
            "--no-mounts",
            "--health-api",
            "legacy",
        ],
    );
    let _proxy = support::Proc::start(
        "health-proxy",
        dir.path(),
        &[
            "health-proxy",
            "--csi-address",
            &format!("unix://{}", driver_socket.display()),
            "--listen",
            &format!("unix://{}", proxy_socket.display()),
            "--state-dir",
            &dir.path().join("proxy-state").display().to_string(),
        ],
    );
    support::wait_for(Duration::from_secs(30), "the proxy's socket", || {
        std::os::unix::net::UnixStream::connect(&proxy_socket)
            .ok()
            .map(|_| ())
    });
    let staging = dir.path().join("kubelet/plugins/globalmount");
    std::fs::create_dir_all(staging.parent().unwrap()).unwrap();
    let out = Command::new(&python)
        .arg(&script)
        .arg(&proxy_socket)
        .arg(&staging)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "OK"),
        "grpcio_health_proxy.py failed:\n{stdout}\n{}\nproxy log:\n{}\ndriver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.path().join("health-proxy.log")).unwrap_or_default(),
        std::fs::read_to_string(dir.path().join("driver.log")).unwrap_or_default()
    );
}
