//! A driver killed in-process ends as `kill -9` ends its process: its socket stays behind with
//! nobody answering it, where a clean stop removes it; a driver started again on the same path
//! serves it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use std::time::Duration;
use volhealth_testkit::{DRIVER, Driver};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_driver_leaves_its_socket_unanswered_and_a_stopped_one_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    for killed in [true, false] {
        let mut driver = Driver::start(dir.path(), DRIVER, "node-a").await;
        let endpoint = driver.endpoint.clone();
        if killed {
            driver.kill();
        } else {
            driver.stop().expect("the driver stops cleanly");
        }
        assert_eq!(socket.exists(), killed, "killed: {killed}");
        assert!(
            volhealth_csi::client::connect(&endpoint, Duration::from_secs(1))
                .await
                .is_err(),
            "nobody answers once it ended (killed: {killed})"
        );
    }
}
