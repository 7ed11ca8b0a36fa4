//! The proxy in front of a driver that reports no health at all: NodeGetVolumeHealth and
//! NodeGetStorageHealth come from the node fault detector, against a real mount. A volume the
//! kubelet set up (staged and published through the proxy) whose publish path is not mounted
//! is NotMounted; mounted, it is healthy; unmounted again, NotMounted again. Needs root (mount);
//! skipped with the reason otherwise, failed instead under VOLHEALTH_REQUIRE_TOOLS=1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::process::Command;
use std::sync::Arc;
use support::RunningProxy;
use volhealth_csi::v1;
use volhealth_driver::HealthCapabilities;
use volhealth_node_faults::{Detector, DetectorConfig, NodeFaultMetrics};
use volhealth_testkit::{Driver, node_health, stage_and_publish_via};

fn root_or_skip() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if root {
        return true;
    }
    if std::env::var("VOLHEALTH_REQUIRE_TOOLS").as_deref() == Ok("1") {
        panic!("this test needs root to mount (VOLHEALTH_REQUIRE_TOOLS=1)");
    }
    println!("SKIPPED: needs root to mount a tmpfs");
    false
}

fn sh(cmd: &str, args: &[&str]) {
    let st = Command::new(cmd).args(args).status().unwrap();
    assert!(st.success(), "{cmd} {args:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_without_health_gets_the_nodes_own_through_the_proxy() {
    if !root_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let driver_dir = dir.path().join("driver");
    std::fs::create_dir_all(&driver_dir).unwrap();
    let driver = Driver::start_configured(&driver_dir, "silent.volhealth.io", "node-a", |c| {
        c.health = HealthCapabilities::NONE;
    })
    .await;
    let detector = Arc::new(Detector::start(
        DetectorConfig {
            kmsg: None,
            // Every question reads the mount table afresh: the test changes it between two.
            mount_table_max_age: std::time::Duration::ZERO,
            ..DetectorConfig::default()
        },
        Arc::new(NodeFaultMetrics::unregistered()),
    ));
    let socket = dir.path().join("health.sock");
    let proxy = RunningProxy::start_with(
        &driver_dir.join("csi.sock"),
        socket.clone(),
        None,
        Some(detector),
    )
    .await;
    let channel = proxy.channel().await;
    let (_, types) = support::capability_types(channel.clone()).await;
    assert!(types.contains(&7) && types.contains(&8), "{types:?}");

    let volume = driver.create_volume("pv-quiet").await;
    let kubelet = dir.path().join("kubelet");
    let publish_dir = kubelet.join("pods/p/volumes/pv-quiet");
    stage_and_publish_via(
        &format!("unix://{}", socket.display()),
        &driver,
        &volume,
        "pv-quiet",
        &kubelet.join("plugins/stage"),
        &publish_dir,
    )
    .await;
    let mut node = v1::node_client::NodeClient::new(channel.clone());
    let mut ask = async || -> Vec<String> {
        let pairs = node_health(&mut node, &volume, "").await.unwrap();
        pairs.into_iter().map(|(_, reason)| reason).collect()
    };
    // The driver left a symlink, not a mount: the kubelet's publish path is not mounted.
    assert_eq!(ask().await, ["NotMounted"]);

    let target = publish_dir.join("mount");
    let _ = std::fs::remove_file(&target);
    std::fs::create_dir_all(&target).unwrap();
    sh(
        "mount",
        &[
            "-t",
            "tmpfs",
            "volhealth-proxy-test",
            target.to_str().unwrap(),
        ],
    );
    let healthy = ask().await;
    sh("umount", &[target.to_str().unwrap()]);
    assert!(healthy.is_empty(), "mounted and answering: {healthy:?}");
    assert_eq!(ask().await, ["NotMounted"]);

    let storage = node
        .node_get_storage_health(v1::NodeGetStorageHealthRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(storage.backend_health.is_empty(), "{storage:?}");
    proxy.stop().await;
    driver.stop().unwrap();
}
