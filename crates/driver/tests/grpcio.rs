//! A client nobody here wrote: Python `grpcio` (gRPC C-core) with its default channel options
//! calls the reference driver (run in this process) over its unix socket, driven by
//! `tests/python/grpcio_csi.py`. C-core sends the socket path as `:authority`; the driver must
//! serve it anyway. The interpreter comes from VOLHEALTH_PYTHON (default `python3`); skipped
//! when grpcio is missing, failed instead under VOLHEALTH_REQUIRE_TOOLS=1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use volhealth_driver::config::DEFAULT_DRIVER_NAME;
use volhealth_testkit::{Driver, run_grpcio_script};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_with_default_options_calls_the_health_rpcs() {
    let dir = tempfile::tempdir().expect("tempdir");
    // C-core sends this path, percent-encoded, as `:authority`: no valid authority at all.
    let driver = Driver::start(dir.path(), DEFAULT_DRIVER_NAME, "node-a").await;
    let socket = dir.path().join("csi.sock");
    if !run_grpcio_script("grpcio_csi.py", &[&socket]).await {
        return;
    }
    driver.stop().expect("the driver stops cleanly");
}
