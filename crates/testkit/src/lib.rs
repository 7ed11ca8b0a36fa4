//! The one home of the tests' support: in-process worlds for the libraries' own tests, and the
//! child processes, waits and probes of the end-to-end tests. The embedded API server and the reference
//! driver run in this process, each on its own thread and runtime (as they would run in their
//! own processes), and are stopped through their shutdown futures; tests talk to them over real
//! HTTP and a real unix socket. What the kubelet and a provisioner would do to a volume is played
//! by hand with real CSI calls. Waits are on conditions with deadlines, never fixed sleeps.
//!
//! Test support: failures panic with what was being done, as tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The driver name the test worlds use.
pub const DRIVER: &str = "hostpath.volhealth.io";
/// Namespace of the test worlds' claims.
pub const NS: &str = "default";
/// Deadline of a test world's waits (generous: the machine is small and shared).
pub const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

mod apiserver;
mod captured_log;
mod claims;
mod csi_calls;
mod event_wait;
mod fuzz;
mod http;
pub mod kernel_faults;
mod kube_client;
pub mod kubectl;
mod kubelet_node;
mod node_world;
mod process;
mod relay;
mod service;
mod status_objects;
mod wait;
mod world;
mod writers;

pub use apiserver::{
    ApiServer, Outage, TESTS_AUTHORIZATION_MODE, config_from_flags, start_apiserver,
    start_apiserver_logged, start_apiserver_with_tokens, start_tls_apiserver, start_with_config,
    token_flags, write_token_file,
};
pub use captured_log::{CapturedLog, LogWriter};
pub use claims::{
    Claims, MetricsPage, claim_status_patches, http_text, metric_sum, pod_volume_conditions,
    storage_conditions,
};
pub use csi_calls::{
    controller_health, health_pairs, list_volume_health, node_health, rpc_capabilities,
    storage_health,
};
pub use event_wait::wait_event;
pub use fuzz::{FUZZ_CASES, fuzz_cases};
pub use http::{b64, http_get, http_get_ok, parse_response};
pub use kube_client::client_for;
pub use kubelet_node::{
    KUBELET_DRIVER, KUBELET_NODE, KubeletNode, NODE_TOKENS, api_patches, metric, storage_probes,
    token_kubeconfig, wait_cycles,
};
pub use node_world::{KubeletLayout, NodeWorld, TOKENS};
pub use process::{
    Proc, PromtoolComplaints, free_addr, free_port, have_tool, promtool_check_metrics, python,
    python_with_kubernetes_client, run_grpcio_script, run_python_ok,
};
pub use relay::Relay;
pub use service::{Failure, Service, ServiceError};
pub use status_objects::{make_all_three_unhealthy, seed_claim_pod_and_csinode};
pub use wait::{block_on, runtime, wait_for, wait_for_blocking, wait_until};
pub use world::{
    Driver, bind_claim, create, create_volume, stage_and_publish, stage_and_publish_via,
};
pub use writers::{
    agent_config, monitor_config, run_agent, run_agent_logged, run_monitor, run_monitor_logged,
};

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
