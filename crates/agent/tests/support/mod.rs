//! The world of the agent's tests with a registered driver: testkit's node cluster (the embedded
//! API server with node tokens, the Nodes, the kubelet root and the helpers that play the
//! kubelet) with the reference driver in this process, registered through the kubelet's plugin
//! registration directory, and agents in this process discovering it there. Conditions are
//! injected through the same library as `volhealth inject`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test support fails by panicking

use std::net::SocketAddr;
use std::time::Duration;
use volhealth_agent::AgentConfig;
use volhealth_driver::injection::Side;
use volhealth_local_cluster::inject::{Clear, InjectRequest, Injection, VolumeCondition};
use volhealth_testkit::{
    CapturedLog, Driver, KubeletNode, Service, free_addr, http_text, run_agent, run_agent_logged,
    wait_for,
};

pub use volhealth_testkit::{KUBELET_DRIVER as DRIVER, KUBELET_NODE as NODE};

pub const WAIT: Duration = Duration::from_secs(40);

/// One node's world: the node cluster, and the reference driver registered in its kubelet root.
pub struct World {
    node: KubeletNode,
    driver: Option<Driver>,
}

/// The node cluster: `api`, `admin`, `dir`, `root`, `state`, `endpoint`, `token_kubeconfig`,
/// `create_volume`, `pod_with_volume`, `kubelet_mount`, `mounted_pod`, `pod_conditions`, `events_about`,
/// `csinode`, `csinode_named`.
impl std::ops::Deref for World {
    type Target = KubeletNode;
    fn deref(&self) -> &KubeletNode {
        &self.node
    }
}

/// What `volhealth inject ARGS` asks for, for the forms these tests use.
fn injection(args: &[&str]) -> Injection {
    let flag = |name: &str| {
        args.iter()
            .position(|a| *a == name)
            .map(|i| args[i + 1].to_string())
    };
    let side = |s: Option<String>| match s.as_deref() {
        Some("node") => Side::Node,
        Some("controller") => Side::Controller,
        other => panic!("no side {other:?}"),
    };
    let required = |name: &str| flag(name).unwrap_or_else(|| panic!("{args:?} needs {name}"));
    match args {
        ["clear", "volume", id, ..] => Injection::Clear {
            what: Clear::Volume {
                volume_id: id.to_string(),
                side: flag("--side").map(|s| side(Some(s))),
            },
        },
        ["clear", "storage"] => Injection::Clear {
            what: Clear::Storage { node: None },
        },
        ["volume", id, ..] => Injection::Volume {
            volume_id: id.to_string(),
            condition: VolumeCondition {
                side: side(flag("--side")),
                status: required("--status"),
                reason: required("--reason"),
                message: String::new(),
            },
        },
        ["storage", ..] => Injection::Storage {
            node: None,
            status: required("--status"),
            reason: required("--reason"),
            message: String::new(),
            access_mode: flag("--access-mode"),
            volume_mode: flag("--volume-mode"),
        },
        other => panic!("no such injection in these tests: {other:?}"),
    }
}

/// The reference driver of `node`'s world serving `endpoint` over the world's driver state,
/// registered in its kubelet root, logging to `log`.
pub async fn start_driver(node: &KubeletNode, endpoint: &str, log: &CapturedLog) -> Driver {
    let registration = node.registration_dir();
    let state = node.state.clone();
    Driver::start_configured_logged(node.dir.path(), DRIVER, NODE, log, |c| {
        c.endpoint = endpoint.to_string();
        c.state_dir = state;
        c.registration_dir = Some(registration);
        // These tests inject their conditions; a probe slowed by a busy test machine must
        // not add a real SlowIo or IoProbeTimedOut of its own.
        c.io_probe_slow = Duration::from_secs(10);
        c.io_probe_timeout = Duration::from_secs(20);
    })
    .await
}

impl World {
    pub async fn start() -> World {
        World::start_with(&[]).await
    }

    /// Starts the API server with `api_flags` (those of `volhealth apiserver`), and the driver.
    pub async fn start_with(api_flags: &[&str]) -> World {
        let node = KubeletNode::start(api_flags).await;
        // Nothing reads the world's own driver's log.
        let driver = start_driver(&node, &node.endpoint, &CapturedLog::new("off")).await;
        World {
            node,
            driver: Some(driver),
        }
    }

    /// Ends the world's driver as `kill -9` would end its process: its CSI and registration
    /// sockets stay behind, with nobody answering them.
    pub fn kill_driver(&mut self) {
        self.driver.take().expect("the driver is running").kill();
    }

    /// `volhealth inject --state-dir STATE ARGS...`, through the library the command runs.
    pub fn inject(&self, args: &[&str]) {
        let request = InjectRequest {
            dir: None,
            state_dir: Some(self.state.clone()),
            what: injection(args),
        };
        let done = std::thread::scope(|s| {
            s.spawn(|| volhealth_testkit::block_on(volhealth_local_cluster::inject::run(request)))
                .join()
                .expect("the injection's thread")
        });
        assert!(done.is_ok(), "inject {args:?} failed: {done:?}");
    }

    /// `volhealth inject volume HANDLE --side node --status STATUS --reason REASON`.
    pub fn inject_node_volume(&self, handle: &str, status: &str, reason: &str) {
        self.inject(&[
            "volume", handle, "--side", "node", "--status", status, "--reason", reason,
        ]);
    }

    /// Pod `web` with volume `vol-web` mounted on NODE, the volume Degraded (Slow) on the node
    /// side; returns the volume's handle.
    pub async fn slow_web_pod(&self) -> String {
        let handle = self.mounted_pod("web").await;
        self.inject_node_volume(&handle, "Degraded", "Slow");
        handle
    }

    /// Waits until object `kind` `name` has an Event of `event_type` and `reason` from the agent.
    pub async fn wait_event(&self, kind: &str, name: &str, event_type: &str, reason: &str) {
        let what = format!("a {event_type} {reason} Event on {kind} {name}");
        wait_for(WAIT, &what, || async {
            self.events_about(kind, name)
                .await
                .iter()
                .any(|(t, r, c)| t == event_type && r == reason && c == "volhealth-agent")
                .then_some(())
        })
        .await;
    }

    /// The agent for `node_name` as the user of `token` (as `volhealth agent --interval 1s
    /// --timeout 5s` discovering its drivers in the kubelet root), serving its metrics on
    /// `http_endpoint` when given.
    pub fn agent_config(
        &self,
        token: &str,
        node_name: &str,
        http_endpoint: Option<SocketAddr>,
    ) -> AgentConfig {
        let mut config = AgentConfig::new(node_name);
        config.kubeconfig = Some(self.token_kubeconfig(token));
        config.kubelet_root_dir = self.root.clone();
        config.interval = Duration::from_secs(1);
        config.timeout = Duration::from_secs(5);
        config.http_endpoint = http_endpoint;
        config
    }

    /// Starts the agent of [`World::agent_config`]; returns it and its /metrics URL once that
    /// answers.
    pub async fn start_agent(&self, name: &str, token: &str, node_name: &str) -> (Service, String) {
        self.start_agent_logging(name, token, node_name, None).await
    }

    /// [`World::start_agent`] with what the agent logs going to `log`.
    pub async fn start_agent_logged(
        &self,
        name: &str,
        token: &str,
        node_name: &str,
        log: &CapturedLog,
    ) -> (Service, String) {
        self.start_agent_logging(name, token, node_name, Some(log))
            .await
    }

    async fn start_agent_logging(
        &self,
        name: &str,
        token: &str,
        node_name: &str,
        log: Option<&CapturedLog>,
    ) -> (Service, String) {
        let address = free_addr();
        let config = self.agent_config(token, node_name, Some(address));
        let agent = match log {
            Some(log) => run_agent_logged(name, config, log),
            None => run_agent(name, config),
        };
        let url = format!("http://{address}/metrics");
        wait_for(WAIT, "the agent's HTTP endpoint", || async {
            assert!(!agent.ended(), "agent {name} ended before serving HTTP");
            http_text(&url).await.map(|_| ())
        })
        .await;
        (agent, url)
    }
}
