//! The two writers of health, the monitor and the agent, run in this process as the tests run
//! them: a cycle every second, five seconds per RPC, each on a thread and runtime of its own
//! until stopped.

use crate::captured_log::CapturedLog;
use crate::service::Service;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use volhealth_agent::{AgentConfig, StaticDriver};
use volhealth_monitor::MonitorConfig;

/// How often the tests' writers run a cycle.
const INTERVAL: Duration = Duration::from_secs(1);
/// The deadline of each of their RPCs.
const RPC_TIMEOUT: Duration = Duration::from_secs(5);

/// The monitor of the driver at `csi_address`, as the user of `kubeconfig`, serving its
/// metrics on `http_endpoint` when given.
pub fn monitor_config(
    csi_address: &str,
    kubeconfig: PathBuf,
    http_endpoint: Option<SocketAddr>,
) -> MonitorConfig {
    MonitorConfig {
        csi_address: csi_address.to_string(),
        kubeconfig: Some(kubeconfig),
        monitor_interval: INTERVAL,
        timeout: RPC_TIMEOUT,
        http_endpoint,
        ..MonitorConfig::default()
    }
}

/// The agent of `node` for the one driver `driver` at `endpoint`, as the user of `kubeconfig`,
/// over the kubelet root `root`, serving its metrics on `http_endpoint` when given.
pub fn agent_config(
    node: &str,
    kubeconfig: PathBuf,
    root: &Path,
    driver: &str,
    endpoint: &str,
    http_endpoint: Option<SocketAddr>,
) -> AgentConfig {
    let mut config = AgentConfig::new(node);
    config.kubeconfig = Some(kubeconfig);
    config.kubelet_root_dir = root.to_path_buf();
    config.drivers = vec![StaticDriver {
        name: driver.to_string(),
        endpoint: endpoint.to_string(),
    }];
    config.interval = INTERVAL;
    config.timeout = RPC_TIMEOUT;
    config.http_endpoint = http_endpoint;
    config
}

/// Runs the monitor with `config` until the service is stopped.
pub fn run_monitor(name: &str, config: MonitorConfig) -> Service {
    Service::start(name, move |shutdown| {
        volhealth_monitor::run(config, shutdown)
    })
}

/// [`run_monitor`] with everything the monitor logs going to `log`.
pub fn run_monitor_logged(name: &str, config: MonitorConfig, log: &CapturedLog) -> Service {
    Service::start_logged(name, log, move |shutdown| {
        volhealth_monitor::run(config, shutdown)
    })
}

/// Runs the agent with `config` until the service is stopped.
pub fn run_agent(name: &str, config: AgentConfig) -> Service {
    Service::start(name, move |shutdown| volhealth_agent::run(config, shutdown))
}

/// [`run_agent`] with what the agent logs going to `log`.
pub fn run_agent_logged(name: &str, config: AgentConfig, log: &CapturedLog) -> Service {
    Service::start_logged(name, log, move |shutdown| {
        volhealth_agent::run(config, shutdown)
    })
}
