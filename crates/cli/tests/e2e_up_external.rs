//! `volhealth up --driver-endpoint`: the monitor and agents run against a CSI driver that `up`
//! did not start (here a separately started `volhealth driver` under another name, as a driver
//! author would run theirs), and its reports reach PVCs, pods and the CSINode.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;
use std::time::Duration;
use support::{bin, volhealth, wait_for};

#[test]
fn up_runs_the_monitor_and_agents_against_an_outside_driver() {
    let ext = tempfile::tempdir().expect("tempdir");
    let socket = ext.path().join("ext.sock");
    let endpoint = format!("unix://{}", socket.display());
    let state = ext.path().join("state");
    let state_s = state.display().to_string();
    let _driver = volhealth(
        "ext-driver",
        ext.path(),
        &[
            "driver",
            "--driver-name",
            "ext.example.com",
            "--endpoint",
            &endpoint,
            "--state-dir",
            &state_s,
            "--node-id",
            "worker-a",
            "--no-mounts",
            "--refresh-interval-ms",
            "200",
        ],
    );
    wait_for(
        Duration::from_secs(30),
        "the outside driver's socket",
        || {
            std::os::unix::net::UnixStream::connect(&socket)
                .ok()
                .map(|_| ())
        },
    );
    let node_flag = format!("worker-a={endpoint}");
    let cluster = Cluster::start_with(
        1,
        &[
            "--driver-endpoint",
            &endpoint,
            "--node-endpoint",
            &node_flag,
        ],
    );
    let up_log = std::fs::read_to_string(cluster.up_log()).unwrap_or_default();
    assert!(
        up_log.contains("using driver ext.example.com"),
        "up did not use the outside driver:\n{up_log}"
    );
    assert!(
        !cluster
            .dir
            .join("logs")
            .join("driver-controller.log")
            .exists(),
        "up started its own driver"
    );

    // The sample volumes were created in the outside driver: inject into its state dir.
    let ids: Vec<String> = std::fs::read_dir(state.join("records"))
        .expect("the outside driver has volume records")
        .filter_map(Result::ok)
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .map(str::to_string)
        })
        .collect();
    assert_eq!(ids.len(), 2, "one node holds two sample volumes: {ids:?}");

    // `inject --dir` would change the reference driver, which this up does not run: it must
    // refuse, never report an injection that changes nothing.
    let dir = cluster.dir.to_string_lossy().to_string();
    let refused = std::process::Command::new(bin())
        .args(["inject", "pvc", "default/data-1", "--dir", &dir])
        .args([
            "--side", "node", "--status", "Degraded", "--reason", "SlowIo",
        ])
        .output()
        .expect("run inject");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "inject succeeded: {said}");
    assert!(
        said.contains("not the reference driver") && said.contains("--driver-endpoint"),
        "{said}"
    );
    let inject = |args: &[&str]| {
        support::output_ok(
            std::process::Command::new(bin())
                .args(["inject", "--state-dir", &state_s])
                .args(args),
        );
    };
    for id in &ids {
        inject(&[
            "volume",
            id,
            "--side",
            "controller",
            "--status",
            "Inaccessible",
            "--reason",
            "VolumeNotFound",
        ]);
        inject(&[
            "volume", id, "--side", "node", "--status", "Degraded", "--reason", "SlowIo",
        ]);
    }
    inject(&[
        "storage",
        "--node",
        "worker-a",
        "--status",
        "StorageUnreachable",
        "--reason",
        "NetworkPartition",
    ]);

    cluster.eventually(
        "the PVCs, pods and CSINode to show the outside driver's reports",
        || {
            cluster.status_of("PersistentVolumeClaim", "data-1", "controller") == ["Inaccessible"]
                && cluster.status_of("PersistentVolumeClaim", "data-2", "controller")
                    == ["Inaccessible"]
                && cluster.status_of("Pod", "web-1", "node") == ["Degraded"]
                && cluster.status_of("Pod", "web-2", "node") == ["Degraded"]
                && cluster.status_of("CSINode", "worker-a", "backend") == ["StorageUnreachable"]
        },
    );
}
