//! The world of the agent's end-to-end tests: the embedded API server with node tokens, the reference driver
//! registered through the kubelet's plugin registration directory, and helpers that play the kubelet.
#![allow(dead_code)]

use crate::support::{ApiServer, Proc, served_url, start_apiserver, volhealth, wait_for_async};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;
use volhealth_csi::v1;
pub use volhealth_testkit::client_for;

pub const DRIVER: &str = "hostpath.volhealth.io";
pub const NODE: &str = "node-a";
pub const WAIT: Duration = Duration::from_secs(40);
const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
                      nodeatok,system:node:node-a,2,\"system:nodes\"\n\
                      nodebtok,system:node:node-b,3,\"system:nodes\"\n";

/// One node's world: API server, reference driver (registered through plugins_registry), kubelet root.
pub struct World {
    pub dir: tempfile::TempDir,
    pub api: ApiServer,
    pub admin: kube::Client,
    pub root: PathBuf,
    pub state: PathBuf,
    pub endpoint: String,
    pub driver: Proc,
}

/// A kubeconfig holding `token`; the user entry has a neutral name so only the server knows whose token it is.
pub fn token_kubeconfig(dir: &Path, url: &str, token: &str) -> PathBuf {
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

pub async fn create<K>(api: &Api<K>, obj: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).expect("object json");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create object")
}

impl World {
    pub async fn start() -> World {
        World::start_with(&[]).await
    }

    /// Starts the API server with `api_extra` flags, and the driver.
    pub async fn start_with(api_extra: &[&str]) -> World {
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

    pub async fn create_volume(&self, name: &str) -> String {
        volhealth_testkit::create_volume(&self.endpoint, name, None).await
    }

    /// PV (CSI) + bound PVC + pod on `node` using it as volume `data`; returns the pod UID.
    pub async fn pod_with_volume(&self, pod: &str, handle: &str, node: &str) -> String {
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

    pub fn staging_path(&self, handle: &str) -> PathBuf {
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

    pub fn publish_path(&self, uid: &str, pv: &str) -> PathBuf {
        self.root
            .join("pods")
            .join(uid)
            .join("volumes/kubernetes.io~csi")
            .join(pv)
            .join("mount")
    }

    /// What the kubelet does: make the staging dir, NodeStageVolume; then the pod dir, NodePublishVolume.
    /// Returns whether staging succeeded (publish is only attempted then).
    pub async fn kubelet_mount(&self, handle: &str, uid: &str, pv: &str) -> bool {
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
                volume_capability: Some(volhealth_testkit::mount_capability()),
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
            volume_capability: Some(volhealth_testkit::mount_capability()),
            ..Default::default()
        })
        .await
        .expect("NodePublishVolume");
        true
    }

    pub fn inject(&self, args: &[&str]) {
        let status = std::process::Command::new(crate::support::bin())
            .args(["inject", "--state-dir", self.state.to_str().unwrap()])
            .args(args)
            .status()
            .expect("run inject");
        assert!(status.success(), "inject {args:?} failed");
    }

    /// Starts the agent with `token` for `node_name`; returns it and its /metrics URL.
    pub async fn start_agent(&self, name: &str, token: &str, node_name: &str) -> (Proc, String) {
        self.start_agent_with(name, token, node_name, &[]).await
    }

    /// Like [`World::start_agent`], with extra flags.
    pub async fn start_agent_with(
        &self,
        name: &str,
        token: &str,
        node_name: &str,
        extra: &[&str],
    ) -> (Proc, String) {
        let kc = token_kubeconfig(self.dir.path(), &self.api.url, token);
        let mut args = vec![
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
        ];
        args.extend_from_slice(extra);
        let mut agent = volhealth(name, self.dir.path(), &args);
        let url = format!("{}/metrics", served_url(&mut agent, WAIT));
        assert!(
            agent.is_running(),
            "agent exited; see {}",
            agent.log.display()
        );
        (agent, url)
    }

    pub async fn pod_conditions(&self, pod: &str) -> Vec<(String, String, String)> {
        volhealth_testkit::pod_volume_conditions(
            &Api::<Pod>::namespaced(self.admin.clone(), "default"),
            pod,
        )
        .await
    }

    /// (type, reason, reportingComponent) of the Events about `kind`/`name`, as kubectl finds them.
    pub async fn events_about(&self, kind: &str, name: &str) -> Vec<(String, String, String)> {
        let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(self.admin.clone(), "default")
            .list(&kube::api::ListParams::default().fields(&selector))
            .await
            .expect("list events")
            .items
            .into_iter()
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.reporting_component.unwrap_or_default(),
                )
            })
            .collect()
    }

    pub async fn csinode(&self) -> Option<CSINode> {
        Api::<CSINode>::all(self.admin.clone())
            .get_opt(NODE)
            .await
            .expect("get csinode")
    }
}

/// The sum of a metric's samples whose line contains every one of `parts`.
pub async fn metric(url: &str, parts: &[&str]) -> f64 {
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
pub fn start_driver(dir: &Path, name: &str, endpoint: &str, state: &Path, root: &Path) -> Proc {
    let reg = root.join("plugins_registry");
    volhealth(
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
            // These tests inject their conditions; a probe slowed by a busy test machine must not
            // add a real SlowIo or IoProbeTimedOut of its own.
            "--io-probe-slow-ms",
            "10000",
            "--io-probe-timeout-ms",
            "20000",
            // Nor a real LowFreeSpace of its own when the test machine's disk is nearly full.
            "--low-space-fraction",
            "0",
        ],
    )
}

/// Samples of `apiserver_request_total` for PATCH of `resource`/`subresource`.
pub async fn api_patches(api: &ApiServer, resource: &str, subresource: &str) -> f64 {
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

pub async fn storage_probes(url: &str) -> f64 {
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
pub async fn wait_cycles(url: &str, n: f64) {
    let start = storage_probes(url).await;
    wait_for_async(WAIT, "more agent probe cycles", || async move {
        (storage_probes(url).await >= start + n).then_some(())
    })
    .await;
}

impl World {
    pub async fn csinode_named(&self, name: &str) -> Option<CSINode> {
        Api::<CSINode>::all(self.admin.clone())
            .get_opt(name)
            .await
            .expect("get csinode")
    }
}
