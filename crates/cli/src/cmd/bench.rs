//! `volhealth bench`: a cluster of real processes at a given size, measured (see
//! `volhealth_local_cluster::bench`); here only its flags.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use volhealth_local_cluster::bench::{self, BenchConfig, Mode};

/// Flags of `volhealth bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// PVCs to create, each with its PV and a pod, spread round-robin over the nodes.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub pvcs: u32,
    /// Simulated nodes: one node plugin and one agent process each.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub nodes: u16,
    /// The monitor's interval.
    #[arg(long, default_value = "1s", value_parser = volhealth_daemon::duration::parse)]
    pub interval: Duration,
    /// The agents' interval. Every node's agents and node plugins share this machine's cores,
    /// where in a cluster each node has its own: 100 agents asking about 50 volumes every
    /// second make 5,000 node RPCs a second here, which would measure the crowding of a
    /// hundred nodes onto one machine rather than the monitor and the API server.
    #[arg(long, default_value = "10s", value_parser = volhealth_daemon::duration::parse)]
    pub agent_interval: Duration,
    /// list: the monitor pages through ControllerListVolumeHealth; get: the driver offers only
    /// ControllerGetVolumeHealth, asked once per volume per interval.
    #[arg(long, value_enum, default_value = "list")]
    pub mode: ModeArg,
    /// The monitor's --list-page-size.
    #[arg(long, default_value_t = 500)]
    pub page_size: u32,
    /// Volumes of the correlated failure: a share (10%) or a number (500).
    #[arg(long, default_value = "10%")]
    pub unhealthy: String,
    /// Total length of the three steady-state windows (healthy, unhealthy, after a monitor
    /// restart), a third each.
    #[arg(long, default_value = "60s", value_parser = volhealth_daemon::duration::parse)]
    pub duration: Duration,
    /// Detection-lag samples of each kind (controller, node volume, node storage).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub samples: u32,
    /// How long to wait for a burst of changes to reach status before giving up on it.
    #[arg(long, default_value = "120s", value_parser = volhealth_daemon::duration::parse)]
    pub wait: Duration,
    /// A flag passed to the monitor as it is (repeatable), e.g. --monitor-flag=--kube-api-qps=5.
    #[arg(long = "monitor-flag", value_name = "FLAG", allow_hyphen_values = true)]
    pub monitor_flags: Vec<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw the lag distributions and the correlated-failure curve as SVG into this file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Where the cluster's state lives (default: a fresh directory under the temp dir, removed
    /// afterwards). Must be empty or absent.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep --dir (logs, database) after the run.
    #[arg(long)]
    pub keep: bool,
}

/// Which ControllerGetVolumeHealth / ControllerListVolumeHealth the driver offers the monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// The monitor pages through ControllerListVolumeHealth.
    List,
    /// The monitor asks ControllerGetVolumeHealth per volume.
    Get,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::List => Mode::List,
            ModeArg::Get => Mode::Get,
        }
    }
}

impl From<Args> for BenchConfig {
    fn from(a: Args) -> Self {
        BenchConfig {
            pvcs: a.pvcs,
            nodes: a.nodes,
            interval: a.interval,
            agent_interval: a.agent_interval,
            mode: a.mode.into(),
            page_size: a.page_size,
            unhealthy: a.unhealthy,
            duration: a.duration,
            samples: a.samples,
            wait: a.wait,
            monitor_flags: a.monitor_flags,
            json: a.json,
            svg: a.svg,
            dir: a.dir,
            keep: a.keep,
        }
    }
}

/// Runs `volhealth bench`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    bench::run(args.into()).await?;
    Ok(ExitCode::SUCCESS)
}
