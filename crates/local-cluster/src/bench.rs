//! `volhealth bench`: builds a cluster of real processes at a given size (the API server, the
//! driver's controller and node plugins, the monitor, one agent per node, and PVs, PVCs and pods
//! whose volumes are created, staged and published through the driver), then measures in one run
//! the steady-state write rate, detection lags, a correlated failure reaching status and clearing,
//! the writes after a monitor restart, and every component's memory and CPU.

pub mod cluster;
pub mod observe;
pub mod phases;
pub mod probe;
pub mod report;
pub mod svg;

use crate::failure::Context as _;
use crate::failure::{Result, ensure, invalid};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use cluster::Mode;

/// What the bench builds and measures: the settings behind `volhealth bench`'s flags.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// PVCs to create, each with its PV and a pod, spread round-robin over the nodes.
    pub pvcs: u32,
    /// Simulated nodes: one node plugin and one agent process each.
    pub nodes: u16,
    /// The monitor's interval.
    pub interval: Duration,
    /// The agents' interval.
    pub agent_interval: Duration,
    /// Whether the monitor lists or gets volume health.
    pub mode: Mode,
    /// The monitor's --list-page-size.
    pub page_size: u32,
    /// Volumes of the correlated failure: a share (`10%`) or a number (`500`).
    pub unhealthy: String,
    /// Total length of the three steady-state windows, a third each.
    pub duration: Duration,
    /// Detection-lag samples of each kind (controller, node volume, node storage).
    pub samples: u32,
    /// How long to wait for a burst of changes to reach status before giving up on it.
    pub wait: Duration,
    /// Flags passed to the monitor as they are.
    pub monitor_flags: Vec<String>,
    /// Write the results as JSON to this file.
    pub json: Option<PathBuf>,
    /// Draw the lag distributions and the correlated-failure curve as SVG into this file.
    pub svg: Option<PathBuf>,
    /// Where the cluster's state lives (default: a fresh directory under the temp dir, removed
    /// afterwards). Must be empty or absent.
    pub dir: Option<PathBuf>,
    /// Keep `dir` (logs, database) after the run.
    pub keep: bool,
}

/// `10%` of `pvcs`, or a plain number, at least 1 and at most `pvcs`.
pub fn parse_unhealthy(s: &str, pvcs: usize) -> Result<usize> {
    let s = s.trim();
    let n = match s.strip_suffix('%') {
        Some(p) => {
            let share: f64 = p
                .trim()
                .parse()
                .with_context(|| format!("--unhealthy {s:?}: expected e.g. 10% or 500"))?;
            ensure!(
                (0.0..=100.0).contains(&share),
                "--unhealthy {s:?} must be between 0% and 100%"
            );
            (share / 100.0 * pvcs as f64).round() as usize
        }
        None => s
            .parse()
            .with_context(|| format!("--unhealthy {s:?}: expected e.g. 10% or 500"))?,
    };
    Ok(n.clamp(1, pvcs))
}

fn bench_dir(args: &BenchConfig) -> Result<(PathBuf, bool)> {
    match &args.dir {
        Some(d) => {
            let empty = match std::fs::read_dir(d) {
                Ok(mut entries) => entries.next().is_none(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                Err(e) => return Err(e).with_context(|| format!("reading --dir {}", d.display())),
            };
            ensure!(
                empty,
                "--dir {} is not empty; the bench builds a fresh cluster",
                d.display()
            );
            Ok((d.clone(), args.keep))
        }
        None => {
            let d = std::env::temp_dir().join(format!("volhealth-bench-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            Ok((d, args.keep))
        }
    }
}

/// Runs `volhealth bench`: builds the cluster, measures it, prints the table and writes the
/// files asked for.
pub async fn run(args: BenchConfig) -> crate::Result<()> {
    build_and_measure(args).await.map_err(crate::Error::Bench)
}

async fn build_and_measure(args: BenchConfig) -> Result<()> {
    let started = Instant::now();
    let pvcs = args.pvcs as usize;
    let unhealthy = parse_unhealthy(&args.unhealthy, pvcs)?;
    let (dir, keep) = bench_dir(&args)?;
    let nodes: Vec<String> = (1..=usize::from(args.nodes))
        .map(crate::up::layout::node_name)
        .collect();
    let plan = cluster::Plan {
        dir: dir.clone(),
        nodes,
        pvcs,
        interval: args.interval,
        agent_interval: args.agent_interval,
        mode: args.mode,
        page_size: args.page_size,
        monitor_flags: args.monitor_flags.clone(),
    };
    let window = args.duration / 3;
    let setup = report::Setup {
        pvcs,
        nodes: plan.nodes.len(),
        interval_s: args.interval.as_secs_f64(),
        agent_interval_s: args.agent_interval.as_secs_f64(),
        mode: args.mode,
        page_size: args.page_size,
        unhealthy_volumes: unhealthy,
        window_s: window.as_secs_f64(),
        monitor_flags: args.monitor_flags.clone(),
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        release_build: !cfg!(debug_assertions),
    };
    println!(
        "volhealth bench: {pvcs} PVCs on {} nodes, interval {:?} (agents {:?}), {:?} mode, state in {}",
        plan.nodes.len(),
        args.interval,
        args.agent_interval,
        args.mode,
        dir.display()
    );
    if cfg!(debug_assertions) {
        println!("  (a debug build: use `cargo run --release -- bench` for real numbers)");
    }
    let knobs = phases::Knobs {
        started,
        interval: args.interval,
        agent_interval: args.agent_interval,
        window,
        samples: args.samples as usize,
        unhealthy,
        wait: args.wait,
    };
    let work = async {
        let mut cluster = cluster::start(&plan).await?;
        let measured = phases::measure(&mut cluster, knobs).await;
        cluster.stop().await;
        measured
    };
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("installing the SIGINT handler")?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    // On a signal the work is dropped, and with it every component (each is killed on drop).
    let measured = tokio::select! {
        r = work => r,
        _ = interrupt.recv() => Err(invalid!("interrupted")),
        _ = terminate.recv() => Err(invalid!("terminated")),
    };
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("  state and logs kept in {}", dir.display());
    }
    let mut report = measured?;
    report.setup = Some(setup);
    println!("\n{}", report.table());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).context("encoding the results")?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
        println!("results written to {}", path.display());
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, svg::render(&report))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("picture written to {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unhealthy_is_a_share_or_a_number_within_the_pvcs() {
        assert_eq!(parse_unhealthy("10%", 5000).unwrap(), 500);
        assert_eq!(parse_unhealthy("500", 5000).unwrap(), 500);
        assert_eq!(parse_unhealthy("0%", 40).unwrap(), 1);
        assert_eq!(parse_unhealthy("9000", 40).unwrap(), 40);
        assert!(parse_unhealthy("lots", 40).is_err());
        assert!(parse_unhealthy("150%", 40).is_err());
    }
}
