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

fn inject_ok(state: &Path, args: &[&str]) {
    let out = inject(state, args);
    assert!(
        out.status.success(),
        "inject {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn mount_cap() -> v1::VolumeCapability {
    v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Mount(Default::default())),
        access_mode: Some(v1::volume_capability::AccessMode { mode: 1 }),
    }
}

async fn create(ctrl: &mut ControllerClient<Channel>, name: &str) -> String {
    let req = v1::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: 1 << 20,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![mount_cap()],
        ..Default::default()
    };
    ctrl.create_volume(req)
        .await
        .expect("CreateVolume")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id
}

async fn get_pairs(ctrl: &mut ControllerClient<Channel>, id: &str) -> Option<Vec<(i32, String)>> {
    let req = v1::ControllerGetVolumeHealthRequest {
        volume_id: id.into(),
        ..Default::default()
    };
    let r = ctrl
        .controller_get_volume_health(req)
        .await
        .ok()?
        .into_inner();
    let mut v: Vec<_> = r
        .volume_health?
        .health_statuses
        .into_iter()
        .map(|e| (e.status, e.reason))
        .collect();
    v.sort();
    Some(v)
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
    let mut ctrl = s.controller().await;
    let id = create(&mut ctrl, "pvc-restart").await;
    inject_ok(
        &s.state,
        &[
            "volume",
            &id,
            "--side",
            "controller",
            "--status",
            "Inaccessible",
            "--reason",
            "ArrayOffline",
            "--message",
            "array a1 down",
        ],
    );
    inject_ok(
        &s.state,
        &[
            "volume",
            &id,
            "--side",
            "controller",
            "--status",
            "Degraded",
            "--reason",
            "ReplicaLost",
        ],
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
    let mut ctrl = s.controller().await;
    wait_for("volume and injections after restart", || {
        let mut c = ctrl.clone();
        let (id, want) = (id.clone(), want.clone());
        async move { (get_pairs(&mut c, &id).await? == want).then_some(()) }
    })
    .await;
    inject_ok(&s.state, &["clear", "volume", &id, "--side", "controller"]);
    wait_for("cleared", || {
        let mut c = ctrl.clone();
        let id = id.clone();
        async move { get_pairs(&mut c, &id).await?.is_empty().then_some(()) }
    })
    .await;
    // A re-create after the restart is idempotent too.
    assert_eq!(create(&mut ctrl, "pvc-restart").await, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_cli_storage_raw_status_rpc_faults_and_list_chaos() {
    let s = Setup::new();
    let _driver = s.start(&["--health-capabilities", "list,get,node-volume,node-storage"]);
    let mut ctrl = s.controller().await;
    let node = s.node().await;
    let ids = [
        create(&mut ctrl, "pvc-1").await,
        create(&mut ctrl, "pvc-2").await,
        create(&mut ctrl, "pvc-3").await,
    ];

    let bad = inject(
        &s.state,
        &[
            "volume", &ids[0], "--side", "node", "--status", "Broken", "--reason", "X",
        ],
    );
    assert!(!bad.status.success(), "an unknown status name is refused");
    inject_ok(
        &s.state,
        &[
            "volume",
            &ids[0],
            "--side",
            "node",
            "--status",
            "42",
            "--reason",
            "FutureCondition",
        ],
    );
    wait_for("raw status 42 on the node side", || {
        let mut n = node.clone();
        let id = ids[0].clone();
        async move {
            let r = n
                .node_get_volume_health(v1::NodeGetVolumeHealthRequest {
                    volume_id: id,
                    ..Default::default()
                })
                .await
                .ok()?;
            r.into_inner()
                .volume_health?
                .health_statuses
                .iter()
                .any(|e| e.status == 42 && e.reason == "FutureCondition")
                .then_some(())
        }
    })
    .await;

    inject_ok(
        &s.state,
        &[
            "storage",
            "--status",
            "StorageDegraded",
            "--reason",
            "PathDegraded",
            "--access-mode",
            "ReadWriteOnce",
            "--volume-mode",
            "Filesystem",
        ],
    );
    wait_for("storage condition", || {
        let mut n = node.clone();
        async move {
            let r = n
                .node_get_storage_health(v1::NodeGetStorageHealthRequest::default())
                .await
                .ok()?
                .into_inner();
            r.backend_health
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
        &["rpc", "ControllerListVolumeHealth", "--code", "UNAVAILABLE"],
    );
    wait_for("list fails with UNAVAILABLE", || {
        let mut c = ctrl.clone();
        async move {
            let e = c
                .controller_list_volume_health(v1::ControllerListVolumeHealthRequest::default())
                .await
                .err()?;
            (e.code() == Code::Unavailable).then_some(())
        }
    })
    .await;
    inject_ok(
        &s.state,
        &["rpc", "ControllerListVolumeHealth", "--code", "OK"],
    );
    inject_ok(&s.state, &["list-chaos", "--duplicates"]);
    wait_for("duplicated entries across pages", || {
        let mut c = ctrl.clone();
        async move {
            let mut token = String::new();
            let mut n = 0;
            loop {
                let req = v1::ControllerListVolumeHealthRequest {
                    max_entries: 1,
                    starting_token: token,
                    ..Default::default()
                };
                let r = c
                    .controller_list_volume_health(req)
                    .await
                    .ok()?
                    .into_inner();
                n += r.entries.len();
                if r.next_token.is_empty() {
                    break;
                }
                token = r.next_token;
            }
            (n > 3).then_some(())
        }
    })
    .await;
    inject_ok(&s.state, &["list-chaos", "--off"]);
    inject_ok(&s.state, &["clear", "all"]);
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
    let mut ctrl = s.controller().await;
    let caps = ctrl
        .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
        .await
        .expect("caps")
        .into_inner();
    let types: Vec<i32> = caps
        .capabilities
        .iter()
        .filter_map(|c| {
            c.r#type
                .as_ref()
                .map(|v1::controller_service_capability::Type::Rpc(r)| r.r#type)
        })
        .collect();
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
