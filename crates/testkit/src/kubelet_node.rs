//! One node's cluster for the agent's tests that play the kubelet: the embedded API server with
//! node tokens (plain HTTP, as the end-to-end tests run it), the Nodes `node-a` and `node-b`,
//! a kubelet root with its plugin registration directory, and where the reference driver
//! serves and keeps its state. Who runs the driver and the agent (a process or this process)
//! is the test's choice; the helpers here create volumes and pods, stage and publish the way
//! the kubelet does, and read what the agent wrote and counted.

use crate::apiserver::{ApiServer, start_apiserver_with_tokens};
use crate::kube_client::client_for;
use crate::wait::wait_for;
use crate::world::{create, create_volume};
use k8s_openapi::api::core::v1::{
    Event, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;
use volhealth_csi::node_requests;
use volhealth_csi::v1;

/// The driver name of these worlds.
pub const KUBELET_DRIVER: &str = crate::DRIVER;
/// The node the driver serves.
pub const KUBELET_NODE: &str = "node-a";
/// The token file: the admin, and the node identities of `node-a` (`nodeatok`) and `node-b`
/// (`nodebtok`).
pub const NODE_TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
                               nodeatok,system:node:node-a,2,\"system:nodes\"\n\
                               nodebtok,system:node:node-b,3,\"system:nodes\"\n";
/// Deadline of the waits on the agent.
const WAIT: Duration = Duration::from_secs(40);

/// The cluster; its directory goes when it is dropped.
pub struct KubeletNode {
    /// Holds the server's data, the kubelet root, the driver's socket and state, and logs.
    pub dir: tempfile::TempDir,
    /// The API server.
    pub api: ApiServer,
    /// An admin client.
    pub admin: kube::Client,
    /// The kubelet root directory (with `plugins_registry`).
    pub root: PathBuf,
    /// The driver's state dir.
    pub state: PathBuf,
    /// The driver's CSI endpoint.
    pub endpoint: String,
}

impl KubeletNode {
    /// Starts the API server with [`NODE_TOKENS`] and `api_flags` and creates the namespace
    /// `default` and both Nodes.
    pub async fn start(api_flags: &[&str]) -> KubeletNode {
        let dir = tempfile::tempdir().expect("tempdir");
        let api = start_apiserver_with_tokens(dir.path(), NODE_TOKENS, api_flags);
        let admin = client_for(&api.kubeconfig).await;
        let root = dir.path().join("kubelet");
        let state = dir.path().join("driver-state");
        let endpoint = format!("unix://{}", dir.path().join("csi.sock").display());
        let _ = Api::<Namespace>::all(admin.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "default"}}))
                    .expect("a namespace's JSON"),
            )
            .await;
        for node in ["node-a", "node-b"] {
            create(
                &Api::<Node>::all(admin.clone()),
                json!({"metadata": {"name": node}}),
            )
            .await;
        }
        KubeletNode {
            dir,
            api,
            admin,
            root,
            state,
            endpoint,
        }
    }

    /// The kubelet's plugin registration directory, where the driver registers.
    pub fn registration_dir(&self) -> PathBuf {
        self.root.join("plugins_registry")
    }

    /// A kubeconfig holding `token`; the user entry has a neutral name so only the server knows
    /// whose token it is.
    pub fn token_kubeconfig(&self, token: &str) -> PathBuf {
        token_kubeconfig(self.dir.path(), &self.api.url, token)
    }

    /// Creates a volume with the driver's CreateVolume; returns its id.
    pub async fn create_volume(&self, name: &str) -> String {
        create_volume(&self.endpoint, name, None).await
    }

    /// PV (CSI) + bound PVC + pod on `node` using it as volume `data`; returns the pod UID.
    pub async fn pod_with_volume(&self, pod: &str, handle: &str, node: &str) -> String {
        let pv = format!("pv-{pod}");
        let claim = format!("claim-{pod}");
        create(
            &Api::<PersistentVolume>::all(self.admin.clone()),
            json!({"metadata": {"name": pv}, "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": KUBELET_DRIVER, "volumeHandle": handle},
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

    /// Where the kubelet stages volume `handle`: the SHA-256 of the handle under the driver's
    /// plugin directory.
    pub fn staging_path(&self, handle: &str) -> PathBuf {
        let out = std::process::Command::new("sh")
            .args(["-c", "printf %s \"$1\" | sha256sum", "sh", handle])
            .output()
            .expect("sha256sum");
        let text = String::from_utf8_lossy(&out.stdout);
        let hash = text.split_whitespace().next().expect("hash").to_string();
        self.root
            .join("plugins/kubernetes.io/csi")
            .join(KUBELET_DRIVER)
            .join(hash)
            .join("globalmount")
    }

    /// Where the kubelet publishes PV `pv` for the pod with `uid`.
    pub fn publish_path(&self, uid: &str, pv: &str) -> PathBuf {
        self.root
            .join("pods")
            .join(uid)
            .join("volumes/kubernetes.io~csi")
            .join(pv)
            .join("mount")
    }

    /// Volume `vol-POD` created on the driver, used by pod `POD` on [`KUBELET_NODE`] (see
    /// [`KubeletNode::pod_with_volume`]) and staged and published there as the kubelet would;
    /// returns the volume's handle.
    pub async fn mounted_pod(&self, pod: &str) -> String {
        let handle = self.create_volume(&format!("vol-{pod}")).await;
        let uid = self.pod_with_volume(pod, &handle, KUBELET_NODE).await;
        assert!(
            self.kubelet_mount(&handle, &uid, &format!("pv-{pod}"))
                .await,
            "staging a created volume succeeds"
        );
        handle
    }

    /// What the kubelet does: make the staging dir, NodeStageVolume; then the pod dir, NodePublishVolume.
    /// Returns whether staging succeeded (publish is only attempted then).
    pub async fn kubelet_mount(&self, handle: &str, uid: &str, pv: &str) -> bool {
        let staging = self.staging_path(handle);
        std::fs::create_dir_all(&staging).expect("staging dir");
        std::fs::write(
            staging.parent().expect("a parent").join("vol_data.json"),
            "{}",
        )
        .expect("vol_data.json");
        let mut node = v1::node_client::NodeClient::new(
            volhealth_csi::client::connect(&self.endpoint, Duration::from_secs(20))
                .await
                .expect("connect to the driver"),
        );
        let staged = node
            .node_stage_volume(node_requests::stage(handle, &staging))
            .await
            .is_ok();
        if !staged {
            return false;
        }
        let target = self.publish_path(uid, pv);
        std::fs::create_dir_all(&target).expect("publish dir");
        std::fs::write(
            target.parent().expect("a parent").join("vol_data.json"),
            "{}",
        )
        .expect("vol_data.json");
        node.node_publish_volume(node_requests::publish(handle, &staging, &target))
            .await
            .expect("NodePublishVolume");
        true
    }

    /// (volume, status, reason) of each volume health condition on pod `pod`.
    pub async fn pod_conditions(&self, pod: &str) -> Vec<(String, String, String)> {
        crate::claims::pod_volume_conditions(
            &Api::<Pod>::namespaced(self.admin.clone(), "default"),
            pod,
        )
        .await
    }

    /// (type, reason, reportingComponent) of the Events about `kind`/`name`, as kubectl finds them.
    pub async fn events_about(&self, kind: &str, name: &str) -> Vec<(String, String, String)> {
        let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
        Api::<Event>::namespaced(self.admin.clone(), "default")
            .list(&ListParams::default().fields(&selector))
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

    /// The CSINode of the driver's node.
    pub async fn csinode(&self) -> Option<CSINode> {
        self.csinode_named(KUBELET_NODE).await
    }

    /// The CSINode `name`.
    pub async fn csinode_named(&self, name: &str) -> Option<CSINode> {
        Api::<CSINode>::all(self.admin.clone())
            .get_opt(name)
            .await
            .expect("get csinode")
    }
}

/// A kubeconfig for the server at `url` holding `token`, written into `dir`; the user entry has a
/// neutral name so only the server knows whose token it is.
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

/// Successful NodeGetStorageHealth calls the agent serving metrics at `url` made: one a cycle.
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
    wait_for(WAIT, "more agent probe cycles", || async move {
        (storage_probes(url).await >= start + n).then_some(())
    })
    .await;
}
