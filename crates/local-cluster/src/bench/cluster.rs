//! The cluster a bench measures: the API server, the driver's controller plugin and one node
//! plugin per node, the monitor and one agent per node, each a real process of this binary, and
//! PVs, PVCs and pods whose volumes are really created, staged and published through the driver.

use crate::failure::Context as _;
use crate::failure::{Failure, Result, bail, ensure};
use crate::up::layout::{self, Layout, Tokens, millis};
use crate::up::workload::{self, Sample};
use crate::up::{Component, Processes};
use futures::StreamExt as _;
use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long each component gets to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Objects created at once while setting up.
const SETUP_CONCURRENCY: usize = 16;

/// One volume of the bench: its sample (claim, PV, pod, node) and the driver's volume id.
#[derive(Debug, Clone)]
pub struct Volume {
    /// Names of the claim, PV, pod and node.
    pub sample: Sample,
    /// The volume id CreateVolume returned.
    pub volume_id: String,
}

/// Which ControllerGetVolumeHealth / ControllerListVolumeHealth the driver offers the monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The monitor pages through ControllerListVolumeHealth.
    List,
    /// The monitor asks ControllerGetVolumeHealth per volume.
    Get,
}

/// What the cluster is started with.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where all state lives.
    pub dir: PathBuf,
    /// Node names.
    pub nodes: Vec<String>,
    /// Number of PVCs (each with a PV and a pod).
    pub pvcs: usize,
    /// The monitor's interval.
    pub interval: Duration,
    /// The agents' interval.
    pub agent_interval: Duration,
    /// List or Get mode.
    pub mode: Mode,
    /// The monitor's `--list-page-size`.
    pub page_size: u32,
    /// Extra flags passed to the monitor as they are (e.g. `--kube-api-qps 50`).
    pub monitor_flags: Vec<String>,
}

/// A started cluster.
pub struct Cluster {
    /// Paths inside the bench dir.
    pub layout: Layout,
    /// The admin client.
    pub client: kube::Client,
    /// The API server's URL.
    pub server: String,
    /// The monitor's metrics URL.
    pub monitor_metrics: String,
    /// Every volume, in creation order.
    pub volumes: Vec<Volume>,
    /// The running processes, by name, in start order.
    pub components: Processes,
    monitor_args: Vec<String>,
    _lock: layout::DirLock,
}

/// Setup progress: one line redrawn in place on a terminal; elsewhere (a log file, a pipe)
/// only the start and the end, each on its own line, so the output has no carriage returns.
fn progress(what: &str, done: usize, total: usize) {
    if std::io::stdout().is_terminal() {
        print!("\r  {what}: {done}/{total}");
        if done == total {
            println!();
        }
    } else if done == 0 || done == total {
        println!("  {what}: {done}/{total}");
    }
    let _ = std::io::stdout().flush();
}

impl Cluster {
    fn spawn(&mut self, name: &str, args: Vec<String>) -> Result<()> {
        self.components.start(name, &self.layout.log(name), &args)
    }

    /// Starts the monitor with [`Cluster::monitor_args`] and learns where its metrics are.
    async fn spawn_monitor(&mut self) -> Result<()> {
        let mut c = Component::start("monitor", &self.layout.log("monitor"), &self.monitor_args)?;
        let bound = c.bound_http(Duration::from_secs(30)).await;
        self.components.push(c);
        self.monitor_metrics = format!("http://{}/metrics", bound?);
        Ok(())
    }

    /// The pid of the component called `name`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.components.pid(name)
    }

    /// Names and pids of every running component.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.components.pids().collect()
    }

    /// The first component that has exited, described.
    pub fn exited(&mut self) -> Option<String> {
        self.components.exited()
    }

    /// Stops the monitor and starts it again with the same flags; returns once it serves metrics.
    pub async fn restart_monitor(&mut self) -> Result<()> {
        if let Some(mut c) = self.components.remove("monitor") {
            c.stop().await;
        }
        self.spawn_monitor().await?;
        let url = self.monitor_metrics.clone();
        wait_ready("the restarted monitor", self, async || {
            super::probe::http_get(&url).await.ok()
        })
        .await?;
        Ok(())
    }

    /// Stops every component, last started first.
    pub async fn stop(&mut self) {
        self.components.stop_all().await;
    }
}

/// Waits for `ready` while checking that no component has exited.
async fn wait_ready<T>(
    what: &str,
    cluster: &mut Cluster,
    mut ready: impl AsyncFnMut() -> Option<T>,
) -> Result<T> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(v) = ready().await {
            return Ok(v);
        }
        if let Some(why) = cluster.exited() {
            bail!("{what} did not start: {why}");
        }
        ensure!(
            Instant::now() < deadline,
            "{what} was not ready after {READY_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts everything but the monitor and agents, and creates the objects; then starts the
/// monitor and agents. `Cluster::stop` must be called on every path after this returns.
pub async fn start(plan: &Plan) -> Result<Cluster> {
    let layout = Layout::new(&plan.dir)?;
    let lock = layout::prepare(&layout)?;
    let tokens = Tokens::load_or_create(&layout, &plan.nodes)?;
    let dir = |p: PathBuf| p.display().to_string();
    let kubeconfig = layout.kubeconfig();
    let _ = std::fs::remove_file(&kubeconfig);
    let mut cluster = Cluster {
        layout: layout.clone(),
        client: kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:1".parse().context("a placeholder URL")?,
        ))
        .context("building a placeholder client")?,
        server: String::new(),
        monitor_metrics: String::new(),
        volumes: Vec::new(),
        components: Processes::default(),
        monitor_args: Vec::new(),
        _lock: lock,
    };
    if let Err(e) = fill(&mut cluster, plan, &tokens, &kubeconfig, &dir).await {
        cluster.stop().await;
        return Err(e);
    }
    Ok(cluster)
}

async fn fill(
    cluster: &mut Cluster,
    plan: &Plan,
    tokens: &Tokens,
    kubeconfig: &std::path::Path,
    dir: &impl Fn(PathBuf) -> String,
) -> Result<()> {
    let layout = cluster.layout.clone();
    println!(
        "  starting the API server, the driver and {} node plugin(s)",
        plan.nodes.len()
    );
    cluster.spawn(
        "apiserver",
        vec![
            "apiserver".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--data-dir".into(),
            dir(layout.apiserver_data()),
            "--token-auth-file".into(),
            dir(layout.tokens()),
            // The benchmark's node plugins have no RBAC roles (`volhealth up` grants them some):
            // they run as in the benchmarks so far, scoped by the Node authorizer only.
            "--authorization-mode".into(),
            "Node,AlwaysAllow".into(),
            "--write-kubeconfig".into(),
            dir(kubeconfig.to_path_buf()),
        ],
    )?;
    let server = wait_ready("the API server", cluster, async || {
        layout::server_of(kubeconfig)
    })
    .await?;
    let conn = crate::connection::connect(Some(kubeconfig), Duration::from_secs(30)).await?;
    let client = conn.client.clone();
    wait_ready("the API server", cluster, async || {
        client.apiserver_version().await.ok()
    })
    .await?;
    cluster.client = client.clone();
    cluster.server = server.clone();
    let ca_path =
        volhealth_apiserver::tls::PkiPaths::of_data_dir(&layout.apiserver_data()).ca_cert();
    let ca = std::fs::read_to_string(&ca_path)
        .with_context(|| format!("reading the API server's CA {}", ca_path.display()))?;
    let with_token = |token: &str| {
        volhealth_apiserver::kubeconfig::Kubeconfig::with_token(&server, Some(&ca), token)
    };
    volhealth_apiserver::kubeconfig::write(
        &layout.monitor_kubeconfig(),
        &with_token(&tokens.monitor),
    )
    .context("writing the monitor's kubeconfig")?;
    for (node, token) in &tokens.nodes {
        volhealth_apiserver::kubeconfig::write(&layout.node_kubeconfig(node), &with_token(token))
            .with_context(|| format!("writing the kubeconfig of {node}"))?;
    }

    let capabilities = match plan.mode {
        Mode::List => "list,get,node-volume,node-storage",
        Mode::Get => "get,node-volume,node-storage",
    };
    let controller = layout.controller_endpoint();
    cluster.spawn(
        "driver-controller",
        layout.controller_plugin_args(&["--health-capabilities", capabilities]),
    )?;
    wait_ready("the controller plugin", cluster, async || {
        volhealth_csi::client::connect(&controller, Duration::from_millis(200))
            .await
            .ok()
    })
    .await?;
    for node in &plan.nodes {
        // Conditions come from injection only: a busy machine must not add SlowIo, nor a
        // nearly full disk LowFreeSpace.
        cluster.spawn(
            &format!("driver-{node}"),
            layout.node_plugin_args(
                node,
                &[
                    "--io-probe-slow-ms",
                    "60000",
                    "--io-probe-timeout-ms",
                    "120000",
                    "--low-space-fraction",
                    "0",
                ],
            ),
        )?;
    }
    for node in &plan.nodes {
        let endpoint = layout.node_endpoint(node);
        wait_ready(&format!("the node plugin of {node}"), cluster, async || {
            volhealth_csi::client::connect(&endpoint, Duration::from_millis(200))
                .await
                .ok()
        })
        .await?;
    }
    let driver = volhealth_driver::config::DEFAULT_DRIVER_NAME.to_string();
    workload::register_cluster(&client, &driver, &plan.nodes).await?;

    let samples = workload::spread(&plan.nodes, plan.pvcs);
    let total = samples.len();
    let what = "creating volumes, PVs, PVCs and pods (staged and published)";
    progress(what, 0, total);
    let mut made = futures::stream::iter(samples.into_iter().map(|s| {
        let (client, driver, controller, layout) = (
            client.clone(),
            driver.clone(),
            controller.clone(),
            layout.clone(),
        );
        async move {
            let plugins = workload::Plugins {
                driver: &driver,
                controller: &controller,
                node_endpoint: &layout.node_endpoint(&s.node),
                kubelet_root: &layout.kubelet_root(&s.node),
            };
            let (volume_id, _) = workload::provision_sample(&client, plugins, &s).await?;
            Ok::<_, Failure>(Volume {
                sample: s,
                volume_id,
            })
        }
    }))
    .buffer_unordered(SETUP_CONCURRENCY);
    let step = (total / 100).max(1);
    while let Some(v) = made.next().await {
        cluster.volumes.push(v?);
        let n = cluster.volumes.len();
        if n.is_multiple_of(step) || n == total {
            progress(what, n, total);
        }
    }
    cluster
        .volumes
        .sort_by_key(|v| v.sample.claim[5..].parse::<usize>().unwrap_or(usize::MAX));

    println!("  starting the monitor and {} agent(s)", plan.nodes.len());
    // Every component binds a free port itself (a port found free here and let go for it could
    // be taken in between); the monitor's, the only one read, comes from its log.
    let mut monitor_args = vec![
        "monitor".to_string(),
        "--csi-address".into(),
        controller.clone(),
        "--kubeconfig".into(),
        dir(layout.monitor_kubeconfig()),
        "--monitor-interval".into(),
        millis(plan.interval),
        "--list-page-size".into(),
        plan.page_size.to_string(),
        "--http-endpoint".into(),
        "127.0.0.1:0".into(),
    ];
    monitor_args.extend(plan.monitor_flags.iter().cloned());
    cluster.monitor_args = monitor_args;
    cluster.spawn_monitor().await?;
    for node in &plan.nodes {
        cluster.spawn(
            &format!("agent-{node}"),
            layout.agent_args(node, plan.agent_interval, "127.0.0.1:0".into()),
        )?;
    }
    let url = cluster.monitor_metrics.clone();
    wait_ready("the monitor", cluster, async || {
        super::probe::http_get(&url).await.ok()
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    if let Some(why) = cluster.exited() {
        bail!("{why}");
    }
    Ok(())
}
