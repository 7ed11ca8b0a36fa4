//! One node's world, as the agent's tests and the tests of both writers need it: the API server,
//! the reference driver, the Node, and a pod `web` on it whose claim `claim-web` is bound to the
//! PV `pv-web` of a real volume, staged and published the way the kubelet does.

use crate::apiserver::ApiServer;
use crate::kube_client::client_for;
use crate::service::Service;
use crate::world::{Driver, bind_claim, create, stage_and_publish};
use crate::writers::{agent_config, monitor_config};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use volhealth_agent::AgentConfig;
use volhealth_monitor::MonitorConfig;

/// A token file for [`NodeWorld::start`]: the admin (`admintok`), the monitor's service account
/// (`monitortok`) and the node identity of `node-a` (`nodetok`).
pub const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
    monitortok,system:serviceaccount:kube-system:csi-external-health-monitor,2,\"system:serviceaccounts\"\n\
    nodetok,system:node:node-a,3,\"system:nodes\"\n";

/// Where the kubelet stages and publishes a volume: (root, driver, volume handle, pod uid, PV)
/// to (the directory holding `globalmount`, the pod's volume directory). The agent's own path
/// rules (`volhealth_agent::KubeletRoot`) are what tests pass.
pub type KubeletLayout = fn(&Path, &str, &str, &str, &str) -> (PathBuf, PathBuf);

/// The world; its directories go when it is dropped.
pub struct NodeWorld {
    /// Holds the API server's data, the driver's state, the kubelet root and kubeconfigs.
    pub dir: tempfile::TempDir,
    /// The API server.
    pub api: ApiServer,
    /// A client with the admin's credentials.
    pub admin: kube::Client,
    /// The reference driver.
    pub driver: Driver,
    /// The volume id of `pv-web`.
    pub volume: String,
    /// The kubelet root directory.
    pub root: PathBuf,
    /// The node's name.
    pub node: String,
}

impl NodeWorld {
    /// Starts it all for `node` with driver name `driver_name`; `tokens` is the API server's
    /// token file (admin first) and `modes` its `--authorization-mode` (None: `Node,AlwaysAllow`).
    pub async fn start(
        driver_name: &str,
        node: &str,
        tokens: &str,
        modes: Option<&str>,
        layout: KubeletLayout,
    ) -> NodeWorld {
        NodeWorld::start_configured(driver_name, node, tokens, modes, layout, |_| {}).await
    }

    /// [`NodeWorld::start_configured`] with [`TOKENS`], `Node,AlwaysAllow` and the kubelet's own
    /// layout (`volhealth_agent::KubeletRoot::volume_dirs`): the world most tests want.
    pub async fn with_driver(
        driver_name: &str,
        node: &str,
        configure: impl FnOnce(&mut volhealth_driver::DriverConfig),
    ) -> NodeWorld {
        let layout = volhealth_agent::KubeletRoot::volume_dirs;
        NodeWorld::start_configured(driver_name, node, TOKENS, None, layout, configure).await
    }

    /// [`NodeWorld::start`] with the driver's configuration changed by `configure`.
    pub async fn start_configured(
        driver_name: &str,
        node: &str,
        tokens: &str,
        modes: Option<&str>,
        layout: KubeletLayout,
        configure: impl FnOnce(&mut volhealth_driver::DriverConfig),
    ) -> NodeWorld {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for sub in ["api", "driver"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("creating a directory");
        }
        let api_dir = dir.path().join("api");
        let api = match modes {
            Some(m) => ApiServer::start_with_modes(&api_dir, Some(tokens), m).await,
            None => ApiServer::start(&api_dir, Some(tokens)).await,
        };
        let driver =
            Driver::start_configured(&dir.path().join("driver"), driver_name, node, configure)
                .await;
        let admin = client_for(&api.kubeconfig).await;
        create(
            &Api::<Node>::all(admin.clone()),
            json!({"metadata": {"name": node}}),
        )
        .await;
        let volume = driver.create_volume("pv-web").await;
        bind_claim(&admin, driver_name, "claim-web", "pv-web", &volume).await;
        let pod = create(
            &Api::<Pod>::namespaced(admin.clone(), "default"),
            json!({"metadata": {"name": "web", "namespace": "default"},
                   "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox"}],
                            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "claim-web"}}]}}),
        )
        .await;
        let uid = pod.metadata.uid.expect("the pod's uid");
        let root = dir.path().join("kubelet");
        let (stage_dir, publish_dir) = layout(&root, driver_name, &volume, &uid, "pv-web");
        stage_and_publish(&driver, &volume, "pv-web", &stage_dir, &publish_dir).await;
        NodeWorld {
            dir,
            api,
            admin,
            driver,
            volume,
            root,
            node: node.to_string(),
        }
    }

    /// Stops `services` (what runs over this world: each must end cleanly), then the driver and
    /// the API server.
    pub fn stop(self, services: impl IntoIterator<Item = Service>) {
        for service in services {
            service.stop().expect("a service stops cleanly");
        }
        self.driver.stop().expect("the driver stops cleanly");
        self.api.stop().expect("the API server stops cleanly");
    }

    /// The monitor of the world's driver as its service account (`monitortok`), serving its
    /// metrics on `http_endpoint` when given.
    pub fn monitor_config(&self, http_endpoint: Option<SocketAddr>) -> MonitorConfig {
        monitor_config(
            &self.driver.endpoint,
            self.api
                .token_kubeconfig(self.dir.path(), "monitor", "monitortok"),
            http_endpoint,
        )
    }

    /// The agent of the world's node for its driver, as the user of token `token` (`nodetok`,
    /// the node's identity, in [`TOKENS`]), serving its metrics on `http_endpoint` when given.
    pub fn agent_config(&self, token: &str, http_endpoint: Option<SocketAddr>) -> AgentConfig {
        agent_config(
            &self.node,
            self.api.token_kubeconfig(self.dir.path(), token, token),
            &self.root,
            &self.driver.name,
            &self.driver.endpoint,
            http_endpoint,
        )
    }
}
