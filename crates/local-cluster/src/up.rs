//! `volhealth up`: the whole system on this machine — the API server, the reference driver's
//! controller and one node plugin per simulated node, the monitor, one agent per node with that
//! node's own identity, and a sample workload whose volumes really exist and are really staged
//! and published. State lives in `--dir`, so a second `up` resumes where the first stopped.

mod children;
mod commands;
mod endpoints;
mod external;
mod extras;
mod identities;
pub mod layout;
mod node_faults;
mod rbac;
mod reference_driver;
pub mod resolve;
pub mod workload;

use anyhow::Context as _;
use commands::{resume_command, self_command};
use futures::{StreamExt as _, TryStreamExt as _};
use layout::{Layout, RunRecord};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How many samples `up` creates at once.
const SAMPLES_AT_ONCE: usize = 16;

/// How long each component gets to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

// What the rest of the crate builds on (`bench` starts its own cluster from these): the state
// directory (`layout`), the child processes (`Component`), the sample workload and the CSI
// calls that make it real (`workload`), and finding things in a running `up` (`resolve`).
pub use children::{Component, Processes};
pub use extras::Extras;
pub use layout::DEFAULT_DIR;
pub use workload::VOLUMES_PER_NODE;

/// What `up` starts: the settings behind `volhealth up`'s flags.
#[derive(Debug, Clone)]
pub struct UpConfig {
    /// Where all state lives (API server database, driver backend, kubeconfigs, logs).
    pub dir: PathBuf,
    /// Number of simulated nodes (unless `node_endpoint` names them).
    pub nodes: u16,
    /// Sample PVCs per node, each with its PV and a pod using it (0: none).
    pub pvcs_per_node: u16,
    /// Address of the API server (HTTPS); port 0 picks a free port.
    pub listen: String,
    /// How often the monitor asks the controller plugin about volume health.
    pub monitor_interval: Duration,
    /// How often each node agent asks its node plugin about volume and storage health.
    pub agent_interval: Duration,
    /// First metrics port: the monitor's; the agent of node N gets PORT + N (default: the
    /// `listen` port + 1; 0 picks free ports).
    pub metrics_port: Option<u16>,
    /// An outside CSI driver's controller plugin, already running, used in place of the
    /// reference driver.
    pub driver_endpoint: Option<String>,
    /// With `driver_endpoint`: `NODE=ENDPOINT`, the driver's node plugin on each node (the nodes
    /// are then exactly those named).
    pub node_endpoint: Vec<String>,
    /// Run the reference driver as a legacy VOLUME_CONDITION driver, probed through the bridge.
    pub legacy_driver: bool,
    /// Real mounts, and node faults seen by the agents (needs root and loop devices).
    pub node_faults: bool,
    /// The optional components.
    pub extras: Extras,
}

/// How a run of `up` that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Stopped by Ctrl-C or SIGTERM after everything had started; a later run resumes.
    Stopped,
    /// Interrupted while starting; what had started was stopped.
    Interrupted,
}

fn millis(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

/// Progress lines: `  what… ok`.
struct Progress;

impl Progress {
    fn step(&self, what: &str) {
        print!("  {what}… ");
        let _ = std::io::stdout().flush();
    }
    fn done(&self, detail: &str) {
        println!("{detail}");
    }
}

/// Applies the RBAC deploy/kubernetes ships for `who` (`yaml`), with its progress line.
async fn grant_rbac(client: &kube::Client, who: &str, yaml: &str) -> anyhow::Result<()> {
    let p = Progress;
    p.step(&format!("granting {who} the RBAC deploy/kubernetes ships"));
    let applied = rbac::apply_all(client, yaml).await?;
    p.done(&format!("ok ({applied} objects)"));
    Ok(())
}

/// Everything `up` started, stopped in reverse start order.
#[derive(Default)]
struct Running {
    components: Processes,
    registrations: external::Registrations,
    /// Kubelet roots whose mounts are unmounted once everything stopped (`--node-faults`).
    unmount_under: Vec<PathBuf>,
}

impl Running {
    fn start(&mut self, name: &str, layout: &Layout, args: Vec<String>) -> anyhow::Result<()> {
        self.components.start(name, &layout.log(name), &args)
    }

    fn last_mut(&mut self) -> anyhow::Result<&mut Component> {
        self.components
            .last_mut()
            .context("no component was started")
    }

    /// The first component that has exited, described.
    fn exited(&mut self) -> Option<String> {
        self.components
            .exited()
            .or_else(|| self.registrations.exited())
    }

    async fn stop_all(&mut self) {
        self.components.stop_all().await;
        self.registrations.stop_all().await;
        if !self.unmount_under.is_empty() {
            let left = node_faults::unmount_all(&self.unmount_under);
            if !left.is_empty() {
                println!("  could not unmount: {}", left.join(", "));
            }
        }
    }
}

/// Waits for `ready` while checking that the last started component is still running.
async fn until_ready<T>(
    running: &mut Running,
    what: &str,
    mut ready: impl AsyncFnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(v) = ready().await {
            return Ok(v);
        }
        if let Some(why) = running.last_mut()?.exited() {
            anyhow::bail!("{what} did not start: {why}");
        }
        if tokio::time::Instant::now() > deadline {
            let c = running.last_mut()?;
            anyhow::bail!(
                "{what} was not ready after {READY_TIMEOUT:?}; see {}:\n{}",
                c.log.display(),
                children::tail(&c.log, 12)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Refuses a `--listen` address that is taken, before anything starts.
fn check_listen(listen: &str) -> anyhow::Result<()> {
    let addr: SocketAddr = listen
        .parse()
        .with_context(|| format!("--listen {listen:?} is not an address like 127.0.0.1:6443"))?;
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "--listen {listen} is already in use (another `volhealth up` or API server?); stop it, or pick a free port with --listen 127.0.0.1:PORT"
        ),
        Err(e) => Err(e).with_context(|| format!("cannot listen on --listen {listen}")),
    }
}

/// Runs `volhealth up` until Ctrl-C or SIGTERM: prepares the state directory, starts every
/// component, writes where their metrics are, and watches them until told to stop.
pub async fn run(cfg: UpConfig) -> crate::Result<Outcome> {
    run_until_stopped(cfg).await.map_err(crate::Error::Up)
}

async fn run_until_stopped(cfg: UpConfig) -> anyhow::Result<Outcome> {
    let layout = Layout::new(&cfg.dir)?;
    let _lock = layout::prepare(&layout)?;
    let previous = RunRecord::load(&layout)?;
    let node_endpoints = external::node_endpoints(&cfg.node_endpoint)?;
    let nodes = node_names(&cfg, &node_endpoints);
    println!(
        "volhealth up: {} node(s), state in {}",
        nodes.len(),
        layout.root().display()
    );
    if let Some(prev) = &previous {
        stop_leftovers(&layout, prev).await;
    }
    check_listen(&cfg.listen)?;
    if cfg.node_faults {
        node_faults::check_machine(layout.root())?;
    }
    let base = cfg
        .metrics_port
        .unwrap_or_else(|| endpoints::default_base(&cfg.listen));
    let mut metrics =
        endpoints::MetricsPorts::plan_with(base, &nodes, cfg.extras.metrics_components())?;

    // Listeners made once: a signal that arrives between two loop turns is kept, not lost.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("installing the SIGINT handler")?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let mut running = Running::default();
    let plan = Plan {
        cfg: &cfg,
        resuming: previous.is_some(),
        layout: &layout,
        nodes: &nodes,
        metrics: &metrics,
        node_endpoints: &node_endpoints,
    };
    let started = tokio::select! {
        r = start(&plan, &mut running) => Some(r),
        _ = interrupt.recv() => None,
        _ = terminate.recv() => None,
    };
    let record = match started {
        None => {
            println!("\ninterrupted; stopping what was started");
            running.stop_all().await;
            return Ok(Outcome::Interrupted);
        }
        Some(Err(e)) => {
            running.stop_all().await;
            return Err(e);
        }
        Some(Ok(record)) => record,
    };
    if let Err(e) = write_endpoints(&mut metrics, &layout, &record, &mut running).await {
        running.stop_all().await;
        return Err(e);
    }
    print_summary(&cfg, &layout, &record, &running, &metrics);

    let outcome = loop {
        tokio::select! {
            _ = interrupt.recv() => break None,
            _ = terminate.recv() => break None,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                if let Some(why) = running.exited() {
                    break Some(why);
                }
            }
        }
    };
    println!("\nstopping…");
    running.stop_all().await;
    let stopped = RunRecord {
        pids: Default::default(),
        ..record
    };
    stopped.store(&layout)?;
    match outcome {
        None => {
            println!("stopped; run `{}` again to resume", resume_command());
            Ok(Outcome::Stopped)
        }
        Some(why) => {
            anyhow::bail!("a component stopped unexpectedly, so everything was stopped: {why}")
        }
    }
}

/// The simulated nodes: those `node_endpoint` names, else `node-1` to `node-N`.
fn node_names(cfg: &UpConfig, node_endpoints: &BTreeMap<String, String>) -> Vec<String> {
    if node_endpoints.is_empty() {
        (1..=usize::from(cfg.nodes))
            .map(layout::node_name)
            .collect()
    } else {
        node_endpoints.keys().cloned().collect()
    }
}

/// Stops what an earlier run that did not shut down left running, before resuming its cluster.
async fn stop_leftovers(layout: &Layout, previous: &RunRecord) {
    let stopped = children::stop_leftovers(&previous.pids, layout.root()).await;
    if !stopped.is_empty() {
        println!(
            "  stopped leftovers of an earlier run that did not shut down: {}",
            stopped.join(", ")
        );
    }
    println!("  resuming the cluster kept in {}", layout.root().display());
}

/// Learns the metrics ports the components bound and writes them, with the server, beside the
/// state (`endpoints::FILE`).
async fn write_endpoints(
    metrics: &mut endpoints::MetricsPorts,
    layout: &Layout,
    record: &RunRecord,
    running: &mut Running,
) -> anyhow::Result<()> {
    metrics
        .learn_bound(running.components.as_mut_slice())
        .await?;
    metrics.write(layout.root(), &record.server)
}

/// What one start of the cluster works from.
struct Plan<'a> {
    cfg: &'a UpConfig,
    /// Whether the state directory holds a cluster from an earlier run.
    resuming: bool,
    layout: &'a Layout,
    nodes: &'a [String],
    metrics: &'a endpoints::MetricsPorts,
    /// Node → the outside driver's node plugin (`node_endpoint`).
    node_endpoints: &'a BTreeMap<String, String>,
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
async fn start(plan: &Plan<'_>, running: &mut Running) -> anyhow::Result<RunRecord> {
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
) -> anyhow::Result<(String, kube::Client)> {
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
async fn start_driver(
    plan: &Plan<'_>,
    driver: &str,
    running: &mut Running,
) -> anyhow::Result<String> {
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
async fn register_cluster(
    client: &kube::Client,
    driver: &str,
    nodes: &[String],
) -> anyhow::Result<()> {
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
) -> anyhow::Result<()> {
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
        anyhow::Ok(created)
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
) -> anyhow::Result<()> {
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
fn start_monitor(plan: &Plan<'_>, controller: &str, running: &mut Running) -> anyhow::Result<()> {
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
) -> anyhow::Result<()> {
    let (layout, nodes) = (plan.layout, plan.nodes);
    let p = Progress;
    p.step(&format!("starting {} node agent(s)", nodes.len()));
    for node in nodes {
        running.start(
            &format!("agent-{node}"),
            layout,
            vec![
                "agent".into(),
                "--node-name".into(),
                node.clone(),
                "--kubeconfig".into(),
                dir(layout.node_kubeconfig(node)),
                "--kubelet-root-dir".into(),
                dir(layout.kubelet_root(node)),
                "--interval".into(),
                millis(plan.cfg.agent_interval),
                "--http-endpoint".into(),
                plan.metrics.http_endpoint(&format!("agent-{node}"))?,
            ],
        )?;
    }
    plan.cfg
        .extras
        .start(client, layout, plan.metrics, running)
        .await?;
    // A component that cannot start (bad flag, refused credentials) usually exits at once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    if let Some(why) = running.exited() {
        anyhow::bail!("{why}");
    }
    p.done("ok");
    Ok(())
}

fn print_summary(
    cfg: &UpConfig,
    layout: &Layout,
    record: &RunRecord,
    running: &Running,
    metrics: &endpoints::MetricsPorts,
) {
    let me = self_command();
    let dir = cfg.dir.display();
    let kubeconfig = Path::new(&cfg.dir).join("kubeconfig");
    let kc = kubeconfig.display();
    println!(
        "\nRunning (logs in {}):",
        layout.root().join("logs").display()
    );
    for c in running.components.iter() {
        println!(
            "  {:<22} pid {}",
            c.name,
            c.pid().map(|p| p.to_string()).unwrap_or_else(|| "-".into())
        );
    }
    println!("  API server             {}", record.server);
    println!(
        "  CSI driver             {} (controller + {} node plugins)",
        record.driver,
        record.nodes.len()
    );
    println!(
        "  sample workload        namespace {}: pods web-N using PVCs data-N",
        workload::NAMESPACE
    );
    println!(
        "\nMetrics (also in {}):",
        layout.root().join(endpoints::FILE).display()
    );
    for (name, url) in metrics.urls(&record.server) {
        println!("  {name:<22} {url}");
    }
    cfg.extras.print_summary();
    println!("\nTry, in another terminal:");
    if cfg.driver_endpoint.is_none() {
        println!(
            "  {me} inject --dir {dir} pvc {}/data-1 --side controller --status Inaccessible --reason VolumeNotFound --message \"backing volume missing\"",
            workload::NAMESPACE
        );
    } else {
        // `inject` changes the reference driver, which is not running: faults come from yours.
        println!("  (make a fault the way your driver detects it; its reports then show up here)");
    }
    if cfg.node_faults {
        node_faults::print_try(layout, &record.nodes);
    }
    println!("  kubectl --kubeconfig {kc} get pvc data-1 -o yaml");
    println!("  {me} status --kubeconfig {kc}");
    println!("\nPress Ctrl-C to stop everything.");
    let _ = std::io::stdout().flush();
}
