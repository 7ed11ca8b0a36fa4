//! `volhealth up`: the whole system on this machine — the API server, the reference driver's
//! controller and one node plugin per simulated node, the monitor, one agent per node with that
//! node's own identity, and a sample workload whose volumes really exist and are really staged
//! and published. State lives in `--dir`, so a second `up` resumes where the first stopped.

pub mod children;
pub mod commands;
pub mod endpoints;
pub mod external;
pub mod extras;
pub mod identities;
pub mod layout;
pub mod node_faults;
pub mod rbac;
pub mod reference_driver;
pub mod resolve;
pub mod workload;

use anyhow::Context as _;
use children::Component;
use commands::{resume_command, self_command};
use futures::{StreamExt as _, TryStreamExt as _};
use layout::{Layout, RunRecord};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// How many samples `up` creates at once.
const SAMPLES_AT_ONCE: usize = 16;

/// How long each component gets to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Flags of `volhealth up`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where all state lives (API server database, driver backend, kubeconfigs, logs).
    #[arg(long, default_value = layout::DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Number of simulated nodes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub nodes: u16,
    /// Sample PVCs per node, each with its PV and a pod using it (0: none; the cluster still
    /// provisions claims you create). `--nodes 100 --pvcs-per-node 50` is the bench's 5,000 x 100.
    #[arg(long, default_value_t = workload::VOLUMES_PER_NODE, value_parser = clap::value_parser!(u16).range(0..=200))]
    pub pvcs_per_node: u16,
    /// Address of the API server (HTTPS); port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: String,
    /// How often the monitor asks the controller plugin about volume health (e.g. 5s, 1m).
    #[arg(long, default_value = "5s", value_parser = volhealth_daemon::duration::parse)]
    pub monitor_interval: Duration,
    /// How often each node agent asks its node plugin about volume and storage health.
    #[arg(long, default_value = "5s", value_parser = volhealth_daemon::duration::parse)]
    pub agent_interval: Duration,
    /// First metrics port: the monitor's; the agent of node N gets PORT + N (default: the
    /// --listen port + 1; 0 picks free ports).
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// Run against this CSI driver (its controller plugin, already running) instead of starting
    /// the reference driver, e.g. unix:///run/csi/controller.sock.
    #[arg(long, value_name = "ENDPOINT")]
    pub driver_endpoint: Option<String>,
    /// With --driver-endpoint: the driver's node plugin on node NODE (repeat for each node; the
    /// nodes are then exactly those named). Without it, every node uses --driver-endpoint.
    #[arg(long, value_name = "NODE=ENDPOINT", requires = "driver_endpoint")]
    pub node_endpoint: Vec<String>,
    /// Run the reference driver as a driver of today: it speaks only the legacy
    /// VOLUME_CONDITION shape (CSI v1.3 to v1.12), so the monitor and the agents probe it through
    /// the legacy bridge. Conditions then show as Degraded/VolumeConditionAbnormal with the
    /// driver's message, unless a rule maps them (docs/legacy-drivers.md).
    #[arg(long, conflicts_with = "driver_endpoint")]
    pub legacy_driver: bool,
    /// Real mounts, and node faults seen by the agents: the volumes are ext4 images the node
    /// plugins loop-mount at stage and bind-mount at publish, and the node plugins report no node
    /// health, so the pods' conditions come from the agents' node fault detector alone
    /// (docs/node-faults.md). Remount a volume's filesystem read-only or unmount a pod's volume
    /// and its pod shows FilesystemReadOnly or NotMounted. Needs root and loop devices; `up`
    /// unmounts everything when it stops.
    #[arg(long, conflicts_with_all = ["driver_endpoint", "legacy_driver"])]
    pub node_faults: bool,
    /// The optional components.
    #[command(flatten)]
    pub extras: extras::ExtrasArgs,
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
    components: Vec<Component>,
    registrations: external::Registrations,
    /// Kubelet roots whose mounts are unmounted once everything stopped (`--node-faults`).
    unmount_under: Vec<PathBuf>,
}

impl Running {
    fn start(&mut self, name: &str, layout: &Layout, args: Vec<String>) -> anyhow::Result<()> {
        let c = Component::start(name, &layout.log(name), &args)?;
        self.components.push(c);
        Ok(())
    }

    fn last_mut(&mut self) -> anyhow::Result<&mut Component> {
        self.components
            .last_mut()
            .context("no component was started")
    }

    /// The first component that has exited, described.
    fn exited(&mut self) -> Option<String> {
        self.components
            .iter_mut()
            .find_map(Component::exited)
            .or_else(|| self.registrations.exited())
    }

    async fn stop_all(&mut self) {
        while let Some(mut c) = self.components.pop() {
            c.stop().await;
        }
        self.registrations.stop_all().await;
        if !self.unmount_under.is_empty() {
            let left = node_faults::unmount_all(&self.unmount_under);
            if !left.is_empty() {
                println!("  could not unmount: {}", left.join(", "));
            }
        }
    }

    fn pids(&self) -> std::collections::BTreeMap<String, u32> {
        self.components
            .iter()
            .filter_map(|c| Some((c.name.clone(), c.pid()?)))
            .collect()
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

fn server_from_kubeconfig(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("server:")
            .map(|s| s.trim().trim_matches('"').to_string())
    })
}

/// Runs `volhealth up` until Ctrl-C or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.dir)?;
    let _lock = layout::prepare(&layout)?;
    let previous = RunRecord::load(&layout)?;
    let node_endpoints = external::node_endpoints(&args.node_endpoint)?;
    let nodes: Vec<String> = if node_endpoints.is_empty() {
        (1..=usize::from(args.nodes))
            .map(layout::node_name)
            .collect()
    } else {
        node_endpoints.keys().cloned().collect()
    };
    println!(
        "volhealth up: {} node(s), state in {}",
        nodes.len(),
        layout.root().display()
    );
    if let Some(prev) = &previous {
        let stopped = children::stop_leftovers(&prev.pids, layout.root()).await;
        if !stopped.is_empty() {
            println!(
                "  stopped leftovers of an earlier run that did not shut down: {}",
                stopped.join(", ")
            );
        }
        println!("  resuming the cluster kept in {}", layout.root().display());
    }
    check_listen(&args.listen)?;
    if args.node_faults {
        node_faults::check_machine(layout.root())?;
    }
    let base = args
        .metrics_port
        .unwrap_or_else(|| endpoints::default_base(&args.listen));
    let mut metrics =
        endpoints::MetricsPorts::plan_with(base, &nodes, args.extras.metrics_components())?;

    // Listeners made once: a signal that arrives between two loop turns is kept, not lost.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("installing the SIGINT handler")?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let mut running = Running::default();
    let started = tokio::select! {
        r = start(&args, previous.is_some(), &layout, &nodes, &metrics, &node_endpoints, &mut running) => Some(r),
        _ = interrupt.recv() => None,
        _ = terminate.recv() => None,
    };
    let record = match started {
        None => {
            println!("\ninterrupted; stopping what was started");
            running.stop_all().await;
            return Ok(ExitCode::from(130));
        }
        Some(Err(e)) => {
            running.stop_all().await;
            return Err(e);
        }
        Some(Ok(record)) => record,
    };
    let learned = match metrics.learn_bound(&mut running.components).await {
        Ok(()) => metrics.write(layout.root(), &record.server),
        Err(e) => Err(e),
    };
    if let Err(e) = learned {
        running.stop_all().await;
        return Err(e);
    }
    print_summary(&args, &layout, &record, &running, &metrics);

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
            Ok(ExitCode::SUCCESS)
        }
        Some(why) => {
            anyhow::bail!("a component stopped unexpectedly, so everything was stopped: {why}")
        }
    }
}

async fn start(
    args: &Args,
    resuming: bool,
    layout: &Layout,
    nodes: &[String],
    metrics: &endpoints::MetricsPorts,
    node_endpoints: &std::collections::BTreeMap<String, String>,
    running: &mut Running,
) -> anyhow::Result<RunRecord> {
    let p = Progress;
    let driver = match &args.driver_endpoint {
        Some(endpoint) => external::driver_name(endpoint, READY_TIMEOUT).await?,
        None => volhealth_driver::config::DEFAULT_DRIVER_NAME.to_string(),
    };
    // Where each node's plugin is: ours, or the outside driver's.
    let node_endpoint = |node: &str| match &args.driver_endpoint {
        Some(controller) => node_endpoints
            .get(node)
            .cloned()
            .unwrap_or_else(|| controller.clone()),
        None => layout.node_endpoint(node),
    };
    let tokens = layout::Tokens::load_or_create(layout, nodes)?;
    let dir = |p: PathBuf| p.display().to_string();

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
        args.listen.clone(),
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
    if let Ok(addr) = args.listen.parse::<SocketAddr>() {
        let ip = addr.ip().to_string();
        if !volhealth_apiserver::tls::DEFAULT_SANS.contains(&ip.as_str()) {
            apiserver.extend(["--tls-san".to_string(), ip]);
        }
    }
    running.start("apiserver", layout, apiserver)?;
    let server = until_ready(running, "the API server", async || {
        server_from_kubeconfig(&kubeconfig)
    })
    .await?;
    // The server wrote its CA and the admin token; people get the admin's certificate instead.
    identities::write_kubeconfigs(layout, &server, &tokens)?;
    let conn = crate::cmd::status::kubeconfig::connect(
        Some(&kubeconfig),
        None,
        Duration::from_secs(10),
        false,
    )
    .await?;
    let client = conn.client.clone();
    until_ready(running, "the API server", async || {
        client.apiserver_version().await.ok()
    })
    .await?;
    p.done(&format!("ok ({server})"));

    grant_rbac(&client, "the monitor", rbac::MONITOR_RBAC).await?;

    let controller = match &args.driver_endpoint {
        Some(endpoint) => {
            p.step(&format!("using driver {driver} at {endpoint}"));
            for node in nodes {
                running.registrations.serve(
                    layout.registration_dir(node),
                    &driver,
                    &node_endpoint(node),
                )?;
            }
            p.done("ok");
            endpoint.clone()
        }
        None => reference_driver::start_reference_driver(layout, nodes, args, running).await?,
    };

    p.step("registering nodes, CSINodes, the CSIDriver and a StorageClass");
    workload::register_cluster(&client, &driver, nodes).await?;
    p.done("ok");

    let samples = workload::samples(nodes, args.pvcs_per_node);
    let n = samples.len();
    p.step(&if resuming {
        format!("checking the {n} sample volumes, claims and pods kept from the last run")
    } else {
        format!("creating {n} volumes, claims and pods, staged and published on their nodes")
    });
    // A few samples at a time: each waits on the driver and the API server, so thousands of
    // them are not created one round trip after another.
    let ensured = futures::stream::iter(samples.iter().map(|s| {
        let (controller, client, driver) = (&controller, &client, &driver);
        let node_endpoint = &node_endpoint;
        async move {
            let volume_id = workload::create_volume(controller, &s.volume).await?;
            let ensured = workload::ensure_objects(client, driver, s, &volume_id).await?;
            workload::stage_and_publish(
                &node_endpoint(&s.node),
                &layout.kubelet_root(&s.node),
                driver,
                s,
                &volume_id,
                &ensured.pod_uid,
            )
            .await?;
            anyhow::Ok(ensured.created)
        }
    }))
    .buffer_unordered(SAMPLES_AT_ONCE)
    .try_collect::<Vec<bool>>()
    .await?;
    let created = ensured.iter().filter(|c| **c).count();
    if !resuming {
        p.done("ok");
    } else if created == 0 {
        p.done("ok (all there)");
    } else {
        p.done(&format!("ok ({created} made again)"));
    }

    p.step("starting the provisioner, PV controller, scheduler and kubelet volume role");
    let mut controllers: Vec<String> = vec![
        "cluster-controllers".into(),
        "--kubeconfig".into(),
        dir(layout.kubeconfig()),
        "--driver".into(),
        driver.clone(),
        "--controller-endpoint".into(),
        controller.clone(),
    ];
    for node in nodes {
        controllers.extend([
            "--node".to_string(),
            format!("{node}={}", node_endpoint(node)),
            "--kubelet-root".to_string(),
            format!("{node}={}", dir(layout.kubelet_root(node))),
        ]);
    }
    running.start("cluster-controllers", layout, controllers)?;
    p.done("ok");

    p.step("starting the monitor");
    running.start(
        "monitor",
        layout,
        vec![
            "monitor".into(),
            "--csi-address".into(),
            controller.clone(),
            "--kubeconfig".into(),
            dir(layout.monitor_kubeconfig()),
            "--monitor-interval".into(),
            millis(args.monitor_interval),
            "--http-endpoint".into(),
            metrics.http_endpoint("monitor")?,
        ],
    )?;
    p.done("ok");

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
                millis(args.agent_interval),
                "--http-endpoint".into(),
                metrics.http_endpoint(&format!("agent-{node}"))?,
            ],
        )?;
    }
    args.extras.start(&client, layout, metrics, running).await?;
    // A component that cannot start (bad flag, refused credentials) usually exits at once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    if let Some(why) = running.exited() {
        anyhow::bail!("{why}");
    }
    p.done("ok");

    let record = RunRecord {
        version: layout::RECORD_VERSION,
        server,
        driver,
        nodes: nodes.to_vec(),
        driver_endpoint: args.driver_endpoint.clone(),
        pids: running.pids(),
    };
    record.store(layout)?;
    Ok(record)
}

fn print_summary(
    args: &Args,
    layout: &Layout,
    record: &RunRecord,
    running: &Running,
    metrics: &endpoints::MetricsPorts,
) {
    let me = self_command();
    let dir = args.dir.display();
    let kubeconfig = Path::new(&args.dir).join("kubeconfig");
    let kc = kubeconfig.display();
    println!(
        "\nRunning (logs in {}):",
        layout.root().join("logs").display()
    );
    for c in &running.components {
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
    args.extras.print_summary();
    println!("\nTry, in another terminal:");
    if args.driver_endpoint.is_none() {
        println!(
            "  {me} inject --dir {dir} pvc {}/data-1 --side controller --status Inaccessible --reason VolumeNotFound --message \"backing volume missing\"",
            workload::NAMESPACE
        );
    } else {
        // `inject` changes the reference driver, which is not running: faults come from yours.
        println!("  (make a fault the way your driver detects it; its reports then show up here)");
    }
    if args.node_faults {
        node_faults::print_try(layout, &record.nodes);
    }
    println!("  kubectl --kubeconfig {kc} get pvc data-1 -o yaml");
    println!("  {me} status --kubeconfig {kc}");
    println!("\nPress Ctrl-C to stop everything.");
    let _ = std::io::stdout().flush();
}
