//! `volhealth driver` and `volhealth inject` as real processes over a real unix socket:
//! injections take effect without a restart and survive one, bad input is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{Proc, bin, volhealth};
use tonic::Code;
use tonic::transport::Channel;
use volhealth_csi::v1;
use volhealth_csi::v1::controller_client::ControllerClient;
use volhealth_csi::v1::node_client::NodeClient;
use volhealth_testkit::{
    controller_health, create_volume, list_volume_health, node_health, rpc_capabilities,
    storage_health,
};

struct Setup {
    dir: tempfile::TempDir,
    state: PathBuf,
    endpoint: String,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let endpoint = format!("unix://{}", dir.path().join("csi.sock").display());
        Setup {
            dir,
            state,
            endpoint,
        }
    }

    fn start(&self, extra: &[&str]) -> Proc {
        let state = self.state.display().to_string();
        let mut args = vec![
            "driver",
            "--endpoint",
            &self.endpoint,
            "--state-dir",
            &state,
            "--node-id",
            "node-a",
        ];
        args.extend_from_slice(extra);
        volhealth("driver", self.dir.path(), &args)
    }

    async fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(connect(&self.endpoint).await)
    }

    async fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(connect(&self.endpoint).await)
    }

    /// Creates a volume of 1 MiB; returns its id.
    async fn create(&self, name: &str) -> String {
        create_volume(&self.endpoint, name, Some(1 << 20)).await
    }
}

async fn connect(endpoint: &str) -> Channel {
    volhealth_csi::client::connect(endpoint, Duration::from_secs(30))
        .await
        .expect("connect to the driver")
}

fn inject(state: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(bin())
        .arg("inject")
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .output()
        .expect("run volhealth inject")
}

/// `volhealth inject` with the words of `command` and then `tail` (arguments that hold spaces),
/// which must succeed.
fn inject_ok(state: &Path, command: &str, tail: &[&str]) {
    let mut args: Vec<&str> = command.split_whitespace().collect();
    args.extend_from_slice(tail);
    let out = inject(state, &args);
    assert!(
        out.status.success(),
        "inject {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn get_pairs(ctrl: &mut ControllerClient<Channel>, id: &str) -> Option<Vec<(i32, String)>> {
    controller_health(ctrl, id).await.ok()
}

async fn wait_for<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    support::wait_for_async(Duration::from_secs(30), what, &mut f).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injections_apply_without_restart_and_survive_one() {
    let s = Setup::new();
    let mut driver = s.start(&[]);
    let ctrl = s.controller().await;
    let id = s.create("pvc-restart").await;
    let volume = format!("volume {id} --side controller");
    inject_ok(
        &s.state,
        &format!("{volume} --status Inaccessible --reason ArrayOffline"),
        &["--message", "array a1 down"],
    );
    inject_ok(
        &s.state,
        &format!("{volume} --status Degraded --reason ReplicaLost"),
        &[],
    );
    let want = vec![
        (1, "ReplicaLost".to_string()),
        (2, "ArrayOffline".to_string()),
    ];
    wait_for("both injected conditions", || {
        let mut c = ctrl.clone();
        let (id, want) = (id.clone(), want.clone());
        async move { (get_pairs(&mut c, &id).await? == want).then_some(()) }
    })
    .await;

    driver.kill();
    let _driver = s.start(&[]);
    let ctrl = s.controller().await;
    wait_for("volume and injections after restart", || {
        let mut c = ctrl.clone();
        let (id, want) = (id.clone(), want.clone());
        async move { (get_pairs(&mut c, &id).await? == want).then_some(()) }
    })
    .await;
    inject_ok(&s.state, &format!("clear {volume}"), &[]);
    wait_for("cleared", || {
        let mut c = ctrl.clone();
        let id = id.clone();
        async move { get_pairs(&mut c, &id).await?.is_empty().then_some(()) }
    })
    .await;
    // A re-create after the restart is idempotent too.
    assert_eq!(s.create("pvc-restart").await, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_cli_storage_raw_status_rpc_faults_and_list_chaos() {
    let s = Setup::new();
    let _driver = s.start(&["--health-capabilities", "list,get,node-volume,node-storage"]);
    let ctrl = s.controller().await;
    let node = s.node().await;
    let ids = [
        s.create("pvc-1").await,
        s.create("pvc-2").await,
        s.create("pvc-3").await,
    ];

    let bad = inject(
        &s.state,
        &[
            "volume", &ids[0], "--side", "node", "--status", "Broken", "--reason", "X",
        ],
    );
    assert!(!bad.status.success(), "an unknown status name is refused");
    let raw = format!(
        "volume {} --side node --status 42 --reason FutureCondition",
        ids[0]
    );
    inject_ok(&s.state, &raw, &[]);
    wait_for("raw status 42 on the node side", || {
        let mut n = node.clone();
        let id = ids[0].clone();
        async move {
            let pairs = node_health(&mut n, &id, "").await.ok()?;
            pairs
                .contains(&(42, "FutureCondition".to_string()))
                .then_some(())
        }
    })
    .await;

    inject_ok(
        &s.state,
        "storage --status StorageDegraded --reason PathDegraded --access-mode ReadWriteOnce \
         --volume-mode Filesystem",
        &[],
    );
    wait_for("storage condition", || {
        let mut n = node.clone();
        async move {
            storage_health(&mut n)
                .await
                .ok()?
                .iter()
                .any(|b| {
                    b.status == 1 && b.reason == "PathDegraded" && b.volume_capability.is_some()
                })
                .then_some(())
        }
    })
    .await;

    inject_ok(
        &s.state,
        "rpc ControllerListVolumeHealth --code UNAVAILABLE",
        &[],
    );
    wait_for("list fails with UNAVAILABLE", || {
        let mut c = ctrl.clone();
        async move {
            let code = list_volume_health(&mut c, 0).await.err()?.code();
            (code == Code::Unavailable).then_some(())
        }
    })
    .await;
    inject_ok(&s.state, "rpc ControllerListVolumeHealth --code OK", &[]);
    inject_ok(&s.state, "list-chaos --duplicates", &[]);
    wait_for("duplicated entries across pages", || {
        let mut c = ctrl.clone();
        async move { (list_volume_health(&mut c, 1).await.ok()?.len() > 3).then_some(()) }
    })
    .await;
    inject_ok(&s.state, "list-chaos --off", &[]);
    inject_ok(&s.state, "clear all", &[]);
    let text = std::fs::read_to_string(s.state.join("injections.json")).expect("injections file");
    assert!(
        !text.contains("FutureCondition") && !text.contains("PathDegraded"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_capabilities_flag_limits_what_is_advertised() {
    let s = Setup::new();
    let _driver = s.start(&["--health-capabilities", "list", "--mode", "controller"]);
    let (types, _) = rpc_capabilities(connect(&s.endpoint).await).await;
    let types = types.expect("caps");
    assert!(types.contains(&17) && !types.contains(&16), "{types:?}");
    let mut node = s.node().await;
    let e = node
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Code::Unimplemented,
        "node service not served in controller mode"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_mounts_the_fallback_is_announced_once() {
    let s = Setup::new();
    let _driver = s.start(&["--no-mounts"]);
    let mut node = s.node().await;
    node.node_get_info(v1::NodeGetInfoRequest {})
        .await
        .expect("NodeGetInfo");
    let log = s.dir.path().join("driver.log");
    let text = wait_for("the fallback announcement", || {
        let log = log.clone();
        async move {
            let text = std::fs::read_to_string(&log).ok()?;
            text.contains("mounts are not available").then_some(text)
        }
    })
    .await;
    assert_eq!(
        text.matches("mounts are not available").count(),
        1,
        "{text}"
    );
}
