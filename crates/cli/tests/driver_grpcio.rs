//! A client nobody here wrote: Python `grpcio` (gRPC C-core) with its default channel options
//! calls `volhealth driver` over its unix socket, driven by `tests/python/grpcio_csi.py`. C-core
//! sends the socket path as `:authority`; the driver must serve it anyway. The interpreter comes
//! from VOLHEALTH_PYTHON (default `python3`); skipped when grpcio is missing, failed instead under
//! VOLHEALTH_REQUIRE_TOOLS=1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[test]
fn grpcio_with_default_options_calls_the_health_rpcs() {
    let python = std::env::var("VOLHEALTH_PYTHON").unwrap_or_else(|_| "python3".into());
    if !support::have_tool(&python, &["-c", "import grpc"]) {
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/grpcio_csi.py");
    let dir = tempfile::tempdir().expect("tempdir");
    // C-core sends this path, percent-encoded, as `:authority`: no valid authority at all.
    let socket = dir.path().join("csi.sock");
    let endpoint = format!("unix://{}", socket.display());
    let state = dir.path().join("state").display().to_string();
    let _driver = support::Proc::start(
        "driver",
        dir.path(),
        &[
            "driver",
            "--endpoint",
            &endpoint,
            "--state-dir",
            &state,
            "--node-id",
            "node-a",
            "--no-mounts",
        ],
    );
    support::wait_for(Duration::from_secs(30), "the driver's socket", || {
        std::os::unix::net::UnixStream::connect(&socket)
            .ok()
            .map(|_| ())
    });
    let out = Command::new(&python)
        .arg(&script)
        .arg(&socket)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "OK"),
        "grpcio_csi.py failed:\n{stdout}\n{}\ndriver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.path().join("driver.log")).unwrap_or_default()
    );
}
