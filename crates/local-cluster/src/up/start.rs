//! `up`'s start, step by step: the API server, the driver, the cluster objects, the samples, the
//! cluster controllers, the monitor, the agents and the optional components, each with its
//! progress line.

use super::layout::{self, Layout, RunRecord, millis};
use super::{
    Progress, READY_TIMEOUT, Running, UpConfig, endpoints, external, grant_rbac, identities, rbac,
    reference_driver, until_ready, workload,
};
use crate::failure::Context as _;
use crate::failure::{Failure, Result, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How many samples `up` creates at once.
const SAMPLES_AT_ONCE: usize = 16;

/// What one start of the cluster works from.
pub(super) struct Plan<'a> {
    pub(super) cfg: &'a UpConfig,
    /// Whether the state directory holds a cluster from an earlier run.
    pub(super) resuming: bool,
    pub(super) layout: &'a Layout,
    pub(super) nodes: &'a [String],
    pub(super) metrics: &'a endpoints::MetricsPorts,
    /// Node → the outside driver's node plugin (`node_endpoint`).
    pub(super) node_endpoints: &'a BTreeMap<String, String>,
}

impl Plan<'_> {
    /// Where `node`'s plugin is: ours, or the outside driver's.
    fn node_endpoint(&self, node: &str) -> String {
        match &self.cfg.driver_endpoint {
            Some(controller) => self
                .node_endpoints
                .get(node)
                .cloned()
                .unwrap_or_else(|| controller.clone()),
            None => self.layout.node_endpoint(node),
        }
    }
}

/// A path as a flag value.
fn dir(p: PathBuf) -> String {
    p.display().to_string()
}

/// Starts everything, step by step, and records what runs; `running` holds whatever started
/// even when a step fails.
pub(super) async fn start(plan: &Plan<'_>, running: &mut Running) -> Result<RunRecord> {
    let driver = match &plan.cfg.driver_endpoint {
        Some(endpoint) => external::driver_name(endpoint, READY_TIMEOUT).await?,
        None => volhealth_driver::config::DEFAULT_DRIVER_NAME.to_string(),
    };
    let tokens = layout::Tokens::load_or_create(plan.layout, plan.nodes)?;
    let (server, client) = start_apiserver(plan, &tokens, running).await?;
    grant_rbac(&client, "the monitor", rbac::MONITOR_RBAC).await?;
    let controller = start_driver(plan, &driver, running).await?;
    register_cluster(&client, &driver, plan.nodes).await?;
    create_samples(plan, &client, &driver, &controller).await?;
    start_cluster_controllers(plan, &driver, &controller, running)?;
    start_monitor(plan, &controller, running)?;
    start_agents_and_extras(plan, &client, running).await?;
    let record = RunRecord {
        version: layout::RECORD_VERSION,
        server,
        driver,
        nodes: plan.nodes.to_vec(),
        driver_endpoint: plan.cfg.driver_endpoint.clone(),
        pids: running.components.pids().collect(),
    };
    record.store(plan.layout)?;
    Ok(record)
}

/// Starts the API server, writes every identity's kubeconfig, and returns the server's URL and
/// an admin client once it answers.
async fn start_apiserver(
    plan: &Plan<'_>,
    tokens: &layout::Tokens,
    running: &mut Running,
) -> Result<(String, kube::Client)> {
    let (cfg, layout) = (plan.cfg, plan.layout);
    let p = Progress;
    p.step("starting the API server");
    let kubeconfig = layout.kubeconfig();
    match std::fs::remove_file(&kubeconfig) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e).with_context(|| format!("removing the old {}", kubeconfig.display()));
        }
    }
    let mut apiserver: Vec<String> = vec![
        "apiserver".into(),
        "--listen".into(),
        cfg.listen.clone(),
        "--data-dir".into(),
        dir(layout.apiserver_data()),
        "--token-auth-file".into(),
        dir(layout.tokens()),
        "--authorization-mode".into(),
        rbac::AUTHORIZATION_MODE.into(),
        "--write-kubeconfig".into(),
        dir(kubeconfig.clone()),
    ];
    // The kubeconfigs name the --listen address: the serving certificate must cover it.
    if let Ok(addr) = cfg.listen.parse::<SocketAddr>() {
        let ip = addr.ip().to_string();
        if !volhealth_apiserver::tls::DEFAULT_SANS.contains(&ip.as_str()) {
            apiserver.extend(["--tls-san".to_string(), ip]);
        }
    }
    running.start("apiserver", layout, apiserver)?;
    let server = until_ready(running, "the API server", async || {
        layout::server_of(&kubeconfig)
    })
    .await?;
    // The server wrote its CA and the admin token; people get the admin's certificate instead.
    identities::write_kubeconfigs(layout, &server, tokens)?;
    let conn = crate::connection::connect(Some(&kubeconfig), Duration::from_secs(10)).await?;
    let client = conn.client.clone();
    until_ready(running, "the API server", async || {
        client.apiserver_version().await.ok()
    })
    .await?;
    p.done(&format!("ok ({server})"));
    Ok((server, client))
}

/// Starts the reference driver, or registers the outside one on every node; returns the
/// controller plugin's endpoint.
async fn start_driver(plan: &Plan<'_>, driver: &str, running: &mut Running) -> Result<String> {
    let Some(endpoint) = &plan.cfg.driver_endpoint else {
        return reference_driver::start_reference_driver(
            plan.layout,
            plan.nodes,
            plan.cfg,
            running,
        )
        .await;
    };
    let p = Progress;
    p.step(&format!("using driver {driver} at {endpoint}"));
    for node in plan.nodes {
        running.registrations.serve(
            plan.layout.registration_dir(node),
            driver,
            &plan.node_endpoint(node),
        )?;
    }
    p.done("ok");
    Ok(endpoint.clone())
}

/// Creates the Node, CSINode, CSIDriver and StorageClass objects.
async fn register_cluster(client: &kube::Client, driver: &str, nodes: &[String]) -> Result<()> {
    let p = Progress;
    p.step("registering nodes, CSINodes, the CSIDriver and a StorageClass");
    workload::register_cluster(client, driver, nodes).await?;
    p.done("ok");
    Ok(())
}

/// Creates the sample volumes, claims and pods (or checks those kept from the last run), each
/// staged and published on its node.
async fn create_samples(
    plan: &Plan<'_>,
    client: &kube::Client,
    driver: &str,
    controller: &str,
) -> Result<()> {
    let p = Progress;
    let samples = workload::samples(plan.nodes, plan.cfg.pvcs_per_node);
    let n = samples.len();
    p.step(&if plan.resuming {
        format!("checking the {n} sample volumes, claims and pods kept from the last run")
    } else {
        format!("creating {n} volumes, claims and pods, staged and published on their nodes")
    });
    // A few samples at a time: each waits on the driver and the API server, so thousands of
    // them are not created one round trip after another.
    let ensured = futures::stream::iter(samples.iter().map(|s| async move {
        let plugins = workload::Plugins {
            driver,
            controller,
            node_endpoint: &plan.node_endpoint(&s.node),
            kubelet_root: &plan.layout.kubelet_root(&s.node),
        };
        let (_, created) = workload::provision_sample(client, plugins, s).await?;
        Ok::<_, Failure>(created)
    }))
    .buffer_unordered(SAMPLES_AT_ONCE)
    .try_collect::<Vec<bool>>()
    .await?;
    let created = ensured.iter().filter(|c| **c).count();
    if !plan.resuming {
        p.done("ok");
    } else if created == 0 {
        p.done("ok (all there)");
    } else {
        p.done(&format!("ok ({created} made again)"));
    }
    Ok(())
}

/// Starts the provisioner, PV controller, scheduler and kubelet volume role (one process).
fn start_cluster_controllers(
    plan: &Plan<'_>,
    driver: &str,
    controller: &str,
    running: &mut Running,
) -> Result<()> {
    let layout = plan.layout;
    let p = Progress;
    p.step("starting the provisioner, PV controller, scheduler and kubelet volume role");
    let mut controllers: Vec<String> = vec![
        "cluster-controllers".into(),
        "--kubeconfig".into(),
        dir(layout.kubeconfig()),
        "--driver".into(),
        driver.to_string(),
        "--controller-endpoint".into(),
        controller.to_string(),
    ];
    for node in plan.nodes {
        controllers.extend([
            "--node".to_string(),
            format!("{node}={}", plan.node_endpoint(node)),
            "--kubelet-root".to_string(),
            format!("{node}={}", dir(layout.kubelet_root(node))),
        ]);
    }
    running.start("cluster-controllers", layout, controllers)?;
    p.done("ok");
    Ok(())
}

/// Starts the monitor against the controller plugin.
fn start_monitor(plan: &Plan<'_>, controller: &str, running: &mut Running) -> Result<()> {
    let p = Progress;
    p.step("starting the monitor");
    running.start(
        "monitor",
        plan.layout,
        vec![
            "monitor".into(),
            "--csi-address".into(),
            controller.to_string(),
            "--kubeconfig".into(),
            dir(plan.layout.monitor_kubeconfig()),
            "--monitor-interval".into(),
            millis(plan.cfg.monitor_interval),
            "--http-endpoint".into(),
            plan.metrics.http_endpoint("monitor")?,
        ],
    )?;
    p.done("ok");
    Ok(())
}

/// Starts one agent per node with that node's identity, then the optional components; fails
/// if any component exits at once.
async fn start_agents_and_extras(
    plan: &Plan<'_>,
    client: &kube::Client,
    running: &mut Running,
) -> Result<()> {
    let (layout, nodes) = (plan.layout, plan.nodes);
    let p = Progress;
    p.step(&format!("starting {} node agent(s)", nodes.len()));
    for node in nodes {
        let endpoint = plan.metrics.http_endpoint(&format!("agent-{node}"))?;
        running.start(
            &format!("agent-{node}"),
            layout,
            layout.agent_args(node, plan.cfg.agent_interval, endpoint),
        )?;
    }
    plan.cfg
        .extras
        .start(client, layout, plan.metrics, running)
        .await?;
    // A component that cannot start (bad flag, refused credentials) usually exits at once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    if let Some(why) = running.exited() {
        bail!("{why}");
    }
    p.done("ok");
    Ok(())
}
