//! The world of the agent's end-to-end tests: testkit's node cluster (the embedded API server
//! with node tokens, the Nodes, the kubelet root and the helpers that play the kubelet), with the
//! reference driver as a `volhealth driver` process registered through the kubelet's plugin
//! registration directory, `volhealth inject` and `volhealth agent` processes.
#![allow(dead_code)]

use crate::support::{Proc, quick_sidecar_flags, served_url, volhealth};
use std::path::Path;
use std::time::Duration;
pub use volhealth_testkit::{KUBELET_NODE as NODE, KubeletNode, wait_cycles};

pub const WAIT: Duration = Duration::from_secs(40);

/// One node's world: the node cluster, and the reference driver's process.
pub struct World {
    /// The API server, the kubelet root and where the driver serves.
    pub node: KubeletNode,
    /// The driver process.
    pub driver: Proc,
}

/// The node cluster: `api`, `admin`, `dir`, `root`, `state`, `endpoint`, `pod_with_volume`,
/// `kubelet_mount`, `pod_conditions`, `events_about`, `csinode`.
impl std::ops::Deref for World {
    type Target = KubeletNode;
    fn deref(&self) -> &KubeletNode {
        &self.node
    }
}

impl World {
    /// Starts the API server and the driver.
    pub async fn start() -> World {
        let node = KubeletNode::start(&[]).await;
        let driver = start_driver(
            node.dir.path(),
            "driver",
            &node.endpoint,
            &node.state,
            &node.root,
        );
        World { node, driver }
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
        let kc = self.token_kubeconfig(token);
        let mut args = vec![
            "agent",
            "--node-name",
            node_name,
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--kubelet-root-dir",
            self.root.to_str().unwrap(),
        ];
        args.extend(quick_sidecar_flags("--interval", extra));
        let mut agent = volhealth(name, self.dir.path(), &args);
        let url = format!("{}/metrics", served_url(&mut agent, WAIT));
        assert!(
            agent.is_running(),
            "agent exited; see {}",
            agent.log.display()
        );
        (agent, url)
    }
}

/// The reference driver serving `endpoint`, registered through `<root>/plugins_registry`.
fn start_driver(dir: &Path, name: &str, endpoint: &str, state: &Path, root: &Path) -> Proc {
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
