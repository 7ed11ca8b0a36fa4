//! End to end: the embedded API server (with node tokens), the reference driver registered through the kubelet's
//! plugin registration directory, and `volhealth agent` acting for one node, with the test playing the kubelet.

mod support;

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{ApiServer, Proc, start_apiserver, wait_for_async};
use volhealth_csi::v1;

const DRIVER: &str = "hostpath.volhealth.io";
const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(40);
const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
                      nodeatok,system:node:node-a,2,\"system:nodes\"\n\
                      nodebtok,system:node:node-b,3,\"system:nodes\"\n";

/// One node's world: API server, reference driver (registered through plugins_registry), kubelet root.
struct World {
    dir: tempfile::TempDir,
    api: ApiServer,
    admin: kube::Client,
    root: PathBuf,
    state: PathBuf,
    endpoint: String,
    driver: Proc,
}

async fn client_for(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kube config");
    kube::Client::try_from(cfg).expect("kube client")
}

/// A kubeconfig holding `token`; the user entry has a neutral name so only the server knows whose token it is.
fn token_kubeconfig(dir: &Path, url: &str, token: &str) -> PathBuf {
    let path = dir.join(format!("kubeconfig-{token}"));
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters:\n- name: k\n  cluster:\n    server: {url}\n\
         contexts:\n- name: c\n  context:\n    cluster: k\n    user: agent\n\
         users:\n- name: agent\n  user:\n    token: {token}\n"
    );
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

async fn create<K>(api: &Api<K>, obj: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).expect("object json");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create object")
}

impl World {
    async fn start() -> World {
        World::start_with(&[]).await
    }

    /// Starts the API server with `api_extra` flags, and the driver.
    async fn start_with(api_extra: &[&str]) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, TOKENS).expect("token file");
        let mut args = vec!["--token-auth-file", tokens.to_str().unwrap()];
        args.extend_from_slice(api_extra);
        let api = start_apiserver(dir.path(), &args);
        let admin = client_for(&api.kubeconfig).await;
        let root = dir.path().join("kubelet");
        let state = dir.path().join("driver-state");
        let endpoint = format!("unix://{}", dir.path().join("csi.sock").display());
        let driver = start_driver(dir.path(), "driver", &endpoint, &state, &root);
        let _ = Api::<Namespace>::all(admin.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap(),
            )
            .await;
        for node in ["node-a", "node-b"] {
            create(
                &Api::<Node>::all(admin.clone()),
                json!({"metadata": {"name": node}}),
            )
            .await;
        }
        World {
            dir,
            api,
            admin,
            root,
            state,
            endpoint,
            driver,
        }
    }

    async fn create_volume(&self, name: &str) -> String {
        let mut c = v1::controller_client::ControllerClient::new(
            volhealth_csi::client::connect(&self.endpoint, Duration::from_secs(20))
                .await
                .expect("connect to the driver"),
        );
        let req = v1::CreateVolumeRequest {
            name: name.into(),
            volume_capabilities: vec![capability()],
            ..Default::default()
        };
        c.create_volume(req)
            .await
            .expect("CreateVolume")
            .into_inner()
            .volume
            .expect("volume")
            .volume_id
    }

    /// PV (CSI) + bound PVC + pod on `node` using it as volume `data`; returns the pod UID.
    async fn pod_with_volume(&self, pod: &str, handle: &str, node: &str) -> String {
        let pv = format!("pv-{pod}");
        let claim = format!("claim-{pod}");
        create(
            &Api::<PersistentVolume>::all(self.admin.clone()),
            json!({"metadata": {"name": pv}, "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": DRIVER, "volumeHandle": handle},
                "claimRef": {"namespace": "default", "name": claim}}}),
        )
        .await;
        create(
            &Api::<PersistentVolumeClaim>::namespaced(self.admin.clone(), "default"),
            json!({"metadata": {"name": claim}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": pv}}),
        )
        .await;
        let p: Pod = create(
            &Api::<Pod>::namespaced(self.admin.clone(), "default"),
            json!({"metadata": {"name": pod}, "spec": {
                "nodeName": node,
                "containers": [{"name": "app", "image": "busybox"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}),
        )
        .await;
        p.metadata.uid.expect("pod uid")
    }

    fn staging_path(&self, handle: &str) -> PathBuf {
        let out = std::process::Command::new("sh")
            .args(["-c", "printf %s \"$1\" | sha256sum", "sh", handle])
            .output()
            .expect("sha256sum");
        let text = String::from_utf8_lossy(&out.stdout);
        let hash = text.split_whitespace().next().expect("hash").to_string();
        self.root
            .join("plugins/kubernetes.io/csi")
            .join(DRIVER)
            .join(hash)
            .join("globalmount")
    }

    fn publish_path(&self, uid: &str, pv: &str) -> PathBuf {
        self.root
            .join("pods")
            .join(uid)
            .join("volumes/kubernetes.io~csi")
            .join(pv)
            .join("mount")
    }

    /// What the kubelet does: make the staging dir, NodeStageVolume; then the pod dir, NodePublishVolume.
    /// Returns whether staging succeeded (publish is only attempted then).
    async fn kubelet_mount(&self, handle: &str, uid: &str, pv: &str) -> bool {
        let staging = self.staging_path(handle);
        std::fs::create_dir_all(&staging).expect("staging dir");
        std::fs::write(staging.parent().unwrap().join("vol_data.json"), "{}")
            .expect("vol_data.json");
        let mut node = v1::node_client::NodeClient::new(
            volhealth_csi::client::connect(&self.endpoint, Duration::from_secs(20))
                .await
                .expect("connect to the driver"),
        );
        let staged = node
            .node_stage_volume(v1::NodeStageVolumeRequest {
                volume_id: handle.into(),
                staging_target_path: staging.display().to_string(),
                volume_capability: Some(capability()),
                ..Default::default()
            })
            .await
            .is_ok();
        if !staged {
            return false;
        }
        let target = self.publish_path(uid, pv);
        std::fs::create_dir_all(&target).expect("publish dir");
        std::fs::write(target.parent().unwrap().join("vol_data.json"), "{}")
            .expect("vol_data.json");
        node.node_publish_volume(v1::NodePublishVolumeRequest {
            volume_id: handle.into(),
            staging_target_path: staging.display().to_string(),
            target_path: target.display().to_string(),
            volume_capability: Some(capability()),
            ..Default::default()
        })
        .await
        .expect("NodePublishVolume");
        true
    }

    fn inject(&self, args: &[&str]) {
        let status = std::process::Command::new(support::bin())
            .args(["inject", "--state-dir", self.state.to_str().unwrap()])
            .args(args)
            .status()
            .expect("run inject");
        assert!(status.success(), "inject {args:?} failed");
    }

    /// Starts the agent with `token` for `node_name`; returns it and its /metrics URL.
    async fn start_agent(&self, name: &str, token: &str, node_name: &str) -> (Proc, String) {
        let kc = token_kubeconfig(self.dir.path(), &self.api.url, token);
        let mut agent = Proc::start(
            name,
            self.dir.path(),
            &[
                "agent",
                "--node-name",
                node_name,
                "--kubeconfig",
                kc.to_str().unwrap(),
                "--kubelet-root-dir",
                self.root.to_str().unwrap(),
                "--interval",
                "1s",
                "--timeout",
                "5s",
                "--http-endpoint",
                "127.0.0.1:0",
            ],
        );
        let log = self.dir.path().join(format!("{name}.log"));
        let url = support::wait_for(WAIT, "the agent's HTTP endpoint", || {
            let text = std::fs::read_to_string(&log).ok()?;
            let at = text.find("http://127.0.0.1:")?;
            let addr: String = text[at..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .collect();
            Some(format!("{addr}/metrics"))
        });
        assert!(agent.is_running(), "agent exited; see {}", log.display());
        (agent, url)
    }

    async fn pod_conditions(&self, pod: &str) -> Vec<(String, String, String)> {
        let p = Api::<Pod>::namespaced(self.admin.clone(), "default")
            .get(pod)
            .await
            .expect("get pod");
        p.status
            .and_then(|s| s.volume_health)
            .unwrap_or_default()
            .into_iter()
            .flat_map(|e| {
                let name = e.name.clone();
                e.health_conditions
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |c| (name.clone(), c.status, c.reason))
            })
            .collect()
    }

    async fn csinode(&self) -> Option<CSINode> {
        Api::<CSINode>::all(self.admin.clone())
            .get_opt(NODE)
            .await
            .expect("get csinode")
    }
}

/// The sum of a metric's samples whose line contains every one of `parts`.
async fn metric(url: &str, parts: &[&str]) -> f64 {
    let Ok(resp) = reqwest::get(url).await else {
        return 0.0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && parts.iter().all(|p| l.contains(p)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The reference driver serving `endpoint`, registered through `<root>/plugins_registry`.
fn start_driver(dir: &Path, name: &str, endpoint: &str, state: &Path, root: &Path) -> Proc {
    let reg = root.join("plugins_registry");
    Proc::start(
        name,
        dir,
        &[
            "driver",
            "--mode",
            "all",
            "--no-mounts",
            "--endpoint",
            endpoint,
            "--state-dir",
            state.to_str().unwrap(),
            "--node-id",
            NODE,
            "--registration-dir",
            reg.to_str().unwrap(),
            "--refresh-interval-ms",
            "200",
        ],
    )
}

fn capability() -> v1::VolumeCapability {
    v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Mount(Default::default())),
        access_mode: Some(v1::volume_capability::AccessMode {
            mode: v1::volume_capability::access_mode::Mode::SingleNodeWriter as i32,
        }),
    }
}

/// Samples of `apiserver_request_total` for PATCH of `resource`/`subresource`.
async fn api_patches(api: &ApiServer, resource: &str, subresource: &str) -> f64 {
    metric(
        &format!("{}/metrics", api.url),
        &[
            "apiserver_request_total{",
            "verb=\"PATCH\"",
            &format!("resource=\"{resource}\""),
            &format!("subresource=\"{subresource}\""),
        ],
    )
    .await
}

async fn storage_probes(url: &str) -> f64 {
    metric(
        url,
        &[
            "csi_volume_health_probe_total{",
            "method=\"NodeGetStorageHealth\"",
            "result=\"success\"",
        ],
    )
    .await
}

/// Waits until the agent has completed `n` more probe cycles (one NodeGetStorageHealth per cycle).
async fn wait_cycles(url: &str, n: f64) {
    let start = storage_probes(url).await;
    wait_for_async(WAIT, "more agent probe cycles", || async move {
        (storage_probes(url).await >= start + n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_reports_and_clears_every_condition() {
    let w = World::start().await;
    let handle = w.create_volume("vol-web").await;
    let uid = w.pod_with_volume("web", &handle, NODE).await;
    assert!(
        w.kubelet_mount(&handle, &uid, "pv-web").await,
        "staging a created volume succeeds"
    );
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;

    // The driver is found through plugins_registry and listed in the CSINode the agent creates.
    wait_for_async(WAIT, "the CSINode listing the driver", || async {
        w.csinode().await.filter(|c| {
            c.spec
                .drivers
                .iter()
                .any(|d| d.name == DRIVER && d.node_id == NODE)
        })
    })
    .await;
    wait_cycles(&url, 2.0).await;
    assert!(
        w.pod_conditions("web").await.is_empty(),
        "a healthy volume has no conditions"
    );

    for (status, reason) in [
        ("Inaccessible", "InjectedGone"),
        ("DataLoss", "InjectedCorrupt"),
        ("Degraded", "InjectedSlow"),
    ] {
        w.inject(&[
            "volume", &handle, "--side", "node", "--status", status, "--reason", reason,
        ]);
        let want = vec![("data".to_string(), status.to_string(), reason.to_string())];
        wait_for_async(WAIT, &format!("{status} on the pod"), || async {
            (w.pod_conditions("web").await == want).then_some(())
        })
        .await;
        let series = format!(
            "csi_node_volume_health_status{{namespace=\"default\",pod=\"web\",volume=\"data\",status=\"{status}\",reason=\"{reason}\"}} 1"
        );
        let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
        assert!(text.contains(&series), "missing {series}");
        w.inject(&["clear", "volume", &handle, "--side", "node"]);
        wait_for_async(WAIT, &format!("{status} to clear"), || async {
            w.pod_conditions("web").await.is_empty().then_some(())
        })
        .await;
    }

    for (status, reason, scoped) in [
        ("StorageUnreachable", "InjectedPartition", false),
        ("StorageDegraded", "InjectedSlowDisks", true),
    ] {
        let mut args = vec!["storage", "--status", status, "--reason", reason];
        if scoped {
            args.extend([
                "--access-mode",
                "ReadWriteOnce",
                "--volume-mode",
                "Filesystem",
            ]);
        }
        w.inject(&args);
        let cond = wait_for_async(WAIT, &format!("{status} on the CSINode"), || async {
            let c = w.csinode().await?;
            let entry = c
                .status?
                .storage_health?
                .into_iter()
                .find(|e| e.name == DRIVER)?;
            entry
                .health_conditions?
                .into_iter()
                .find(|c| c.status == status && c.reason == reason)
        })
        .await;
        if scoped {
            assert_eq!(cond.access_mode.as_deref(), Some("ReadWriteOnce"));
            assert_eq!(cond.volume_mode.as_deref(), Some("Filesystem"));
        } else {
            assert_eq!((cond.access_mode, cond.volume_mode), (None, None));
        }
        assert!(cond.last_transition_time.is_some());
        w.inject(&["clear", "storage"]);
        wait_for_async(WAIT, &format!("{status} to clear"), || async {
            let c = w.csinode().await?;
            let empty = c
                .status
                .and_then(|s| s.storage_health)
                .unwrap_or_default()
                .iter()
                .all(|e| e.name != DRIVER);
            empty.then_some(())
        })
        .await;
    }

    // Steady state: several more cycles, not one more status write.
    let pods_before = api_patches(&w.api, "pods", "status").await;
    let csinodes_before = api_patches(&w.api, "csinodes", "status").await;
    assert!(
        pods_before >= 6.0 && csinodes_before >= 4.0,
        "the writes above were counted"
    );
    wait_cycles(&url, 4.0).await;
    assert_eq!(api_patches(&w.api, "pods", "status").await, pods_before);
    assert_eq!(
        api_patches(&w.api, "csinodes", "status").await,
        csinodes_before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_probes_only_attempted_volumes_and_reports_failed_stage() {
    let w = World::start().await;
    let mounted = w.create_volume("vol-mounted").await;
    let idle = w.create_volume("vol-idle").await;
    let uid_mounted = w.pod_with_volume("mounted", &mounted, NODE).await;
    let _uid_idle = w.pod_with_volume("idle", &idle, NODE).await;
    // A volume the driver does not have: its stage fails, and the kubelet has still attempted it.
    let uid_broken = w
        .pod_with_volume("broken", "vol-does-not-exist", NODE)
        .await;
    assert!(w.kubelet_mount(&mounted, &uid_mounted, "pv-mounted").await);
    assert!(
        !w.kubelet_mount("vol-does-not-exist", &uid_broken, "pv-broken")
            .await,
        "stage must fail"
    );
    // The idle volume is unhealthy in the driver, but the kubelet never tried to mount it.
    w.inject(&[
        "volume",
        &idle,
        "--side",
        "node",
        "--status",
        "Degraded",
        "--reason",
        "NeverAsked",
    ]);
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;

    let broken = wait_for_async(WAIT, "the failed stage reported on the pod", || async {
        let c = w.pod_conditions("broken").await;
        (!c.is_empty()).then_some(c)
    })
    .await;
    assert!(
        broken
            .iter()
            .all(|(v, s, _)| v == "data" && s == "Inaccessible"),
        "{broken:?}"
    );
    wait_cycles(&url, 4.0).await;
    assert!(
        w.pod_conditions("idle").await.is_empty(),
        "a never-attempted volume is not probed"
    );
    assert!(w.pod_conditions("mounted").await.is_empty());
    // Two attempted volumes per cycle, never three.
    let cycles = storage_probes(&url).await;
    let volume_probes = metric(
        &url,
        &[
            "csi_volume_health_probe_total{",
            "method=\"NodeGetVolumeHealth\"",
        ],
    )
    .await;
    assert!(
        volume_probes <= 2.0 * (cycles + 1.0),
        "{volume_probes} volume probes in {cycles} cycles"
    );
    assert!(
        volume_probes >= 2.0 * (cycles - 1.0),
        "{volume_probes} volume probes in {cycles} cycles"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_keeps_conditions_when_the_driver_dies() {
    let mut w = World::start().await;
    let handle = w.create_volume("vol-web").await;
    let uid = w.pod_with_volume("web", &handle, NODE).await;
    assert!(w.kubelet_mount(&handle, &uid, "pv-web").await);
    w.inject(&[
        "volume", &handle, "--side", "node", "--status", "Degraded", "--reason", "Slow",
    ]);
    w.inject(&[
        "storage",
        "--status",
        "StorageDegraded",
        "--reason",
        "SlowDisks",
    ]);
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;
    wait_for_async(WAIT, "Degraded on the pod", || async {
        (!w.pod_conditions("web").await.is_empty()).then_some(())
    })
    .await;
    wait_for_async(WAIT, "StorageDegraded on the CSINode", || async {
        w.csinode()
            .await?
            .status?
            .storage_health
            .filter(|s| !s.is_empty())
            .map(|_| ())
    })
    .await;
    // A status number this version does not know is never taken for health: Degraded stays.
    w.inject(&["clear", "volume", &handle, "--side", "node"]);
    w.inject(&[
        "volume",
        &handle,
        "--side",
        "node",
        "--status",
        "9",
        "--reason",
        "FromTheFuture",
    ]);
    let unknown = || {
        metric(
            &url,
            &["csi_volume_health_unknown_condition_total{", "status=\"9\""],
        )
    };
    wait_for_async(WAIT, "the unknown status counted", || async {
        (unknown().await >= 2.0).then_some(())
    })
    .await;
    assert_eq!(
        w.pod_conditions("web").await,
        vec![("data".into(), "Degraded".into(), "Slow".into())]
    );
    w.driver.kill();
    let errors = || {
        metric(
            &url,
            &[
                "csi_volume_health_probe_total{",
                "method=\"NodeGetVolumeHealth\"",
                "result=\"error\"",
            ],
        )
    };
    wait_for_async(WAIT, "failed probes of the dead driver", || async {
        (errors().await >= 3.0).then_some(())
    })
    .await;
    assert_eq!(
        w.pod_conditions("web").await,
        vec![("data".into(), "Degraded".into(), "Slow".into())]
    );
    let storage = w
        .csinode()
        .await
        .and_then(|c| c.status?.storage_health)
        .unwrap_or_default();
    assert_eq!(
        storage.len(),
        1,
        "a dead driver clears nothing: {storage:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_scoping_protects_other_nodes() {
    let w = World::start().await;
    let uid_b = w.pod_with_volume("on-b", "vol-b", "node-b").await;
    let _ = uid_b;
    let node_a = client_for(&token_kubeconfig(w.dir.path(), &w.api.url, "nodeatok")).await;
    // node-a may not write the status of a pod bound to node-b ...
    let patch = json!({"status": {"volumeHealth": [{"name": "data", "healthConditions": [
        {"status": "Degraded", "reason": "Forged"}]}]}});
    let err = Api::<Pod>::namespaced(node_a.clone(), "default")
        .patch_status("on-b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect_err("node-a patched a pod of node-b");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err}"
    );
    // ... nor create or write node-b's CSINode.
    let csinode_b: CSINode =
        serde_json::from_value(json!({"metadata": {"name": "node-b"}, "spec": {"drivers": []}}))
            .unwrap();
    let err = Api::<CSINode>::all(node_a.clone())
        .create(&PostParams::default(), &csinode_b)
        .await
        .expect_err("created");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err}"
    );
    Api::<CSINode>::all(w.admin.clone())
        .create(&PostParams::default(), &csinode_b)
        .await
        .expect("admin creates");
    let status = json!({"status": {"storageHealth": null}});
    let err = Api::<CSINode>::all(node_a)
        .patch_status("node-b", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect_err("node-a patched node-b's CSINode");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err}"
    );
    Api::<CSINode>::all(w.admin.clone())
        .delete("node-b", &Default::default())
        .await
        .expect("delete csinode");

    // An agent told it is node-b while holding node-a's token stops at its first write, loudly.
    let (mut agent, _) = w
        .start_agent("agent-misconfigured", "nodeatok", "node-b")
        .await;
    let code = support::wait_for(WAIT, "the misconfigured agent to exit", || {
        agent.child.try_wait().ok().flatten()
    });
    assert!(!code.success(), "the misconfigured agent must fail");
    let log = std::fs::read_to_string(w.dir.path().join("agent-misconfigured.log")).unwrap();
    assert!(
        log.contains("does not match the node the credentials belong to"),
        "{log}"
    );
    let b = Api::<Pod>::namespaced(w.admin.clone(), "default")
        .get("on-b")
        .await
        .unwrap();
    assert!(b.status.and_then(|s| s.volume_health).is_none());
    assert!(
        w.csinode_named("node-b").await.is_none(),
        "nothing was written for node-b"
    );
}

impl World {
    async fn csinode_named(&self, name: &str) -> Option<CSINode> {
        Api::<CSINode>::all(self.admin.clone())
            .get_opt(name)
            .await
            .expect("get csinode")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_picks_up_drivers_that_come_and_go() {
    let mut w = World::start().await;
    w.driver.kill();
    let reg_sock = w
        .root
        .join("plugins_registry")
        .join(format!("{DRIVER}-reg.sock"));
    let _ = std::fs::remove_file(&reg_sock);
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;
    assert!(w.csinode().await.is_none(), "no driver, no CSINode");

    // A driver appears: registered, listed in a new CSINode, probed.
    let first = format!("unix://{}", w.dir.path().join("csi-1.sock").display());
    let mut driver = start_driver(w.dir.path(), "driver-1", &first, &w.state, &w.root);
    w.inject(&[
        "storage",
        "--status",
        "StorageUnreachable",
        "--reason",
        "InjectedPartition",
    ]);
    wait_for_async(WAIT, "StorageUnreachable from the new driver", || async {
        let c = w.csinode().await?;
        c.spec
            .drivers
            .iter()
            .any(|d| d.name == DRIVER)
            .then_some(())?;
        c.status?
            .storage_health
            .filter(|s| !s.is_empty())
            .map(|_| ())
    })
    .await;

    // It goes away and comes back on a different endpoint: only a new registration can find it.
    driver.kill();
    let _ = std::fs::remove_file(&reg_sock);
    let second = format!("unix://{}", w.dir.path().join("csi-2.sock").display());
    let _driver = start_driver(w.dir.path(), "driver-2", &second, &w.state, &w.root);
    w.inject(&["clear", "storage"]);
    wait_for_async(
        WAIT,
        "the storage condition cleared through the re-registered driver",
        || async {
            let c = w.csinode().await?;
            c.status
                .and_then(|s| s.storage_health)
                .unwrap_or_default()
                .is_empty()
                .then_some(())
        },
    )
    .await;
    assert!(storage_probes(&url).await >= 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_backs_off_when_the_api_server_drops_health_fields() {
    let w = World::start_with(&["--feature-gates", "CSIVolumeHealth=false"]).await;
    let handle = w.create_volume("vol-web").await;
    let uid = w.pod_with_volume("web", &handle, NODE).await;
    assert!(w.kubelet_mount(&handle, &uid, "pv-web").await);
    w.inject(&[
        "volume", &handle, "--side", "node", "--status", "Degraded", "--reason", "Slow",
    ]);
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;
    let dropped = || {
        metric(
            &url,
            &[
                "volhealth_agent_status_writes_total{",
                "resource=\"pods/status\"",
                "result=\"dropped\"",
            ],
        )
    };
    wait_for_async(WAIT, "a dropped pod status write", || async {
        (dropped().await >= 1.0).then_some(())
    })
    .await;
    let before = api_patches(&w.api, "pods", "status").await;
    wait_cycles(&url, 8.0).await;
    let added = api_patches(&w.api, "pods", "status").await - before;
    assert!(
        added <= 3.0,
        "{added} pod status writes in 8 cycles: not backed off"
    );
    assert!(
        w.pod_conditions("web").await.is_empty(),
        "the gated server stored nothing"
    );
    let log = std::fs::read_to_string(w.dir.path().join("agent.log")).unwrap();
    let warnings = log
        .lines()
        .filter(|l| l.contains("pod default/web") && l.contains("did not store"))
        .count();
    assert_eq!(warnings, 1, "logged once:\n{log}");
}
