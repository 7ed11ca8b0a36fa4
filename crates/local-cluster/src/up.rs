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
mod start;
pub mod workload;

use crate::failure::Context as _;
use crate::failure::{Result, bail};
use commands::{resume_command, self_command};
use layout::{Layout, RunRecord};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// The reference driver's LowFreeSpace threshold (`None`: the driver's default).
    pub low_space_fraction: Option<f64>,
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
async fn grant_rbac(client: &kube::Client, who: &str, yaml: &str) -> Result<()> {
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
    fn start(&mut self, name: &str, layout: &Layout, args: Vec<String>) -> Result<()> {
        self.components.start(name, &layout.log(name), &args)
    }

    fn last_mut(&mut self) -> Result<&mut Component> {
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
) -> Result<T> {
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(v) = ready().await {
            return Ok(v);
        }
        if let Some(why) = running.last_mut()?.exited() {
            bail!("{what} did not start: {why}");
        }
        if tokio::time::Instant::now() > deadline {
            let c = running.last_mut()?;
            bail!(
                "{what} was not ready after {READY_TIMEOUT:?}; see {}:\n{}",
                c.log.display(),
                children::tail(&c.log, 12)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Refuses a `--listen` address that is taken, before anything starts.
fn check_listen(listen: &str) -> Result<()> {
    let addr: SocketAddr = listen
        .parse()
        .with_context(|| format!("--listen {listen:?} is not an address like 127.0.0.1:6443"))?;
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => bail!(
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

async fn run_until_stopped(cfg: UpConfig) -> Result<Outcome> {
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
    let plan = start::Plan {
        cfg: &cfg,
        resuming: previous.is_some(),
        layout: &layout,
        nodes: &nodes,
        metrics: &metrics,
        node_endpoints: &node_endpoints,
    };
    let started = tokio::select! {
        r = start::start(&plan, &mut running) => Some(r),
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
            bail!("a component stopped unexpectedly, so everything was stopped: {why}")
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
) -> Result<()> {
    metrics
        .learn_bound(running.components.as_mut_slice())
        .await?;
    metrics.write(layout.root(), &record.server)
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
