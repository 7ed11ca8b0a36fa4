//! The measurements, in the order one run makes them: steady state while healthy, detection lags,
//! a correlated failure, steady state while it is on status, a monitor restart, the recovery.

use super::cluster::{Cluster, Volume};
use super::observe::{Kind, Observer};
use super::probe::{self, ProcStat};
use super::report::{Burst, Group, Lag, Report, Resources, Restart, Steady};
use crate::failure::Context as _;
use crate::failure::{Result, bail};
use crate::up::workload::NAMESPACE;
use std::time::{Duration, Instant};
use volhealth_driver::condition::{Condition, StorageCondition};
use volhealth_driver::injection::{self, NodeStorageInjection, Side, VolumeInjection};
use volhealth_driver::state::StateDir;

/// How the run is paced.
#[derive(Debug, Clone, Copy)]
pub struct Knobs {
    /// When the bench started (setup time is measured from here).
    pub started: Instant,
    /// The monitor's interval.
    pub interval: Duration,
    /// The agents' interval.
    pub agent_interval: Duration,
    /// Each steady-state window.
    pub window: Duration,
    /// Lag samples per kind.
    pub samples: usize,
    /// Volumes of the correlated failure.
    pub unhealthy: usize,
    /// Longest wait for a burst.
    pub wait: Duration,
}

impl Knobs {
    /// The longer of the two intervals.
    fn slowest(&self) -> Duration {
        self.interval.max(self.agent_interval)
    }
}

/// Counters read at one moment.
struct Counters {
    at: Instant,
    api: String,
    monitor: String,
    monitor_cpu: f64,
    machine: probe::MachineCpu,
    /// Whether `monitor` was read just after the monitor finished a cycle.
    at_cycle_end: bool,
}

async fn monitor_metrics(cluster: &Cluster) -> Result<String> {
    probe::http_get(&cluster.monitor_metrics)
        .await
        .context("reading the monitor's metrics")
}

async fn counters(cluster: &Cluster) -> Result<Counters> {
    let monitor = monitor_metrics(cluster).await?;
    read_counters(cluster, monitor, false).await
}

/// How often the monitor's metrics are read while waiting for a cycle to end.
const CYCLE_END_POLL: Duration = Duration::from_millis(10);

/// Counters read just after the monitor finished a cycle, so that a window between two of them
/// holds whole cycles: the calls of a cycle spread over nine tenths of the interval, and the
/// next starts only when it is due. Waits at most three intervals (a cycle that overran), then
/// reads them whenever it is.
async fn counters_at_cycle_end(cluster: &Cluster, k: &Knobs) -> Result<Counters> {
    let mut monitor = monitor_metrics(cluster).await?;
    let (ended, _, _) = probe::cycles(&monitor);
    let deadline = Instant::now() + k.interval * 3;
    while Instant::now() < deadline {
        tokio::time::sleep(CYCLE_END_POLL).await;
        monitor = monitor_metrics(cluster).await?;
        if probe::cycles(&monitor).0 > ended {
            return read_counters(cluster, monitor, true).await;
        }
    }
    read_counters(cluster, monitor, false).await
}

/// The other counters, read after the monitor's `monitor`.
async fn read_counters(cluster: &Cluster, monitor: String, at_cycle_end: bool) -> Result<Counters> {
    let at = Instant::now();
    let monitor_cpu = cluster
        .pid("monitor")
        .and_then(probe::proc_stat)
        .map_or(0.0, |s| s.cpu_s);
    let machine = probe::machine_cpu().unwrap_or_default();
    let api = probe::api_metrics(&cluster.client)
        .await
        .context("reading the API server's metrics")?;
    Ok(Counters {
        at,
        api,
        monitor,
        monitor_cpu,
        machine,
        at_cycle_end,
    })
}

fn status_patches(text: &str) -> f64 {
    ["persistentvolumeclaims", "pods", "csinodes"]
        .iter()
        .map(|r| probe::status_patches(text, r))
        .sum()
}

fn events(text: &str) -> f64 {
    probe::metric_sum(
        text,
        "apiserver_request_total",
        &["verb=\"POST\"", "resource=\"events\""],
    ) + probe::metric_sum(
        text,
        "apiserver_request_total",
        &["verb=\"PATCH\"", "resource=\"events\""],
    )
}

const GET: &str = "ControllerGetVolumeHealth";
const LIST: &str = "ControllerListVolumeHealth";

async fn steady(cluster: &Cluster, k: &Knobs, what: &str) -> Result<Steady> {
    println!("  steady state, {what}: {:.1} s", k.window.as_secs_f64());
    let a = counters_at_cycle_end(cluster, k).await?;
    tokio::time::sleep(k.window).await;
    let b = counters_at_cycle_end(cluster, k).await?;
    let minutes = b.at.duration_since(a.at).as_secs_f64() / 60.0;
    let (ended_a, took_a, overran_a) = probe::cycles(&a.monitor);
    let (ended_b, took_b, overran_b) = probe::cycles(&b.monitor);
    let ended = ended_b - ended_a;
    let cycle_aligned = a.at_cycle_end && b.at_cycle_end && ended >= 1.0;
    // Whole cycles between two cycle ends; else as many cycles as intervals passed.
    let cycles = if cycle_aligned {
        ended
    } else {
        (b.at.duration_since(a.at).as_secs_f64() / k.interval.as_secs_f64()).max(1e-9)
    };
    let pvcs = cluster.volumes.len().max(1) as f64;
    let (machine_busy_pct, machine_steal_pct) = a.machine.shares_until(&b.machine);
    Ok(Steady {
        machine_busy_pct,
        machine_steal_pct,
        cycles_ended: ended,
        cycle_overruns: overran_b - overran_a,
        cycle_mean_s: if ended > 0.0 {
            (took_b - took_a) / ended
        } else {
            0.0
        },
        cycle_aligned,
        writes_per_min: (probe::api_writes(&b.api) - probe::api_writes(&a.api)) / minutes,
        status_patches_per_min: (status_patches(&b.api) - status_patches(&a.api)) / minutes,
        status_patches_per_min_by_resource: ["persistentvolumeclaims", "pods", "csinodes"]
            .iter()
            .map(|r| {
                let d = probe::status_patches(&b.api, r) - probe::status_patches(&a.api, r);
                (r.to_string(), d / minutes)
            })
            .collect(),
        list_rpcs_per_cycle: (probe::probes(&b.monitor, LIST) - probe::probes(&a.monitor, LIST))
            / cycles,
        get_rpcs_per_cycle: (probe::probes(&b.monitor, GET) - probe::probes(&a.monitor, GET))
            / cycles,
        monitor_cpu_ms_per_cycle_per_1000: (b.monitor_cpu - a.monitor_cpu) * 1000.0
            / cycles
            / (pvcs / 1000.0),
    })
}

fn state(cluster: &Cluster) -> StateDir {
    StateDir::new(cluster.layout.driver_state())
}

fn inject_volumes(cluster: &Cluster, vols: &[&Volume], side: Side) -> Result<()> {
    let status = injection::parse_volume_status("Inaccessible")?;
    injection::update(&state(cluster), |i| {
        for v in vols {
            i.add_volume(VolumeInjection {
                volume_id: v.volume_id.clone(),
                side,
                condition: Condition::new(
                    status,
                    super::observe::REASON,
                    "injected by volhealth bench",
                ),
            });
        }
    })
    .context("injecting volume conditions")
}

fn clear_volumes(cluster: &Cluster, vols: &[&Volume]) -> Result<()> {
    let ids: std::collections::HashSet<&str> = vols.iter().map(|v| v.volume_id.as_str()).collect();
    injection::update(&state(cluster), |i| {
        i.volumes
            .retain(|inj| !ids.contains(inj.volume_id.as_str()));
    })
    .context("clearing volume conditions")
}

fn inject_storage(cluster: &Cluster, node: &str) -> Result<()> {
    let status = injection::parse_storage_status("StorageUnreachable")?;
    injection::update(&state(cluster), |i| {
        i.add_node_storage(NodeStorageInjection {
            node: node.to_string(),
            condition: StorageCondition {
                status,
                reason: super::observe::REASON.into(),
                message: "injected by volhealth bench".into(),
                access_mode: None,
                volume_mode: None,
            },
        })
    })
    .context("injecting a storage condition")
}

fn clear_storage(cluster: &Cluster) -> Result<()> {
    injection::update(&state(cluster), |i| i.node_storage.clear())
        .context("clearing storage conditions")
}

fn lag_of(obs: &Observer, kind: Kind, injected: &[(String, Instant)]) -> Lag {
    let values = injected
        .iter()
        .filter_map(|(name, at)| {
            obs.first(kind, name, true, *at)
                .map(|seen| seen.duration_since(*at).as_secs_f64())
        })
        .collect();
    Lag::of(values, injected.len())
}

/// Injects `samples` controller and node-volume conditions, staggered so they fall at every
/// phase of the cycles, then measures how long each took to reach status.
async fn volume_lags(cluster: &Cluster, obs: &Observer, k: &Knobs) -> Result<(Lag, Lag)> {
    let n = cluster.volumes.len();
    let s = k.samples.min(n);
    println!("  detection lag: {s} controller and {s} node-volume conditions");
    let ctl: Vec<&Volume> = cluster.volumes.iter().take(s).collect();
    let node: Vec<&Volume> = cluster.volumes.iter().rev().take(s).collect();
    let stagger = k.slowest() / 7;
    let mut ctl_at = Vec::new();
    let mut node_at = Vec::new();
    for i in 0..s {
        inject_volumes(cluster, &ctl[i..=i], Side::Controller)?;
        ctl_at.push((ctl[i].sample.claim.clone(), Instant::now()));
        inject_volumes(cluster, &node[i..=i], Side::Node)?;
        node_at.push((node[i].sample.pod.clone(), Instant::now()));
        tokio::time::sleep(stagger).await;
    }
    let timeout = k.slowest() * 10 + Duration::from_secs(30);
    obs.wait(timeout, |o| {
        ctl_at
            .iter()
            .all(|(c, at)| o.first(Kind::Controller, c, true, *at).is_some())
            && node_at
                .iter()
                .all(|(p, at)| o.first(Kind::NodeVolume, p, true, *at).is_some())
    })
    .await;
    let lags = (
        lag_of(obs, Kind::Controller, &ctl_at),
        lag_of(obs, Kind::NodeVolume, &node_at),
    );
    let all: Vec<&Volume> = ctl.iter().chain(node.iter()).copied().collect();
    clear_volumes(cluster, &all)?;
    obs.wait(timeout, |o| {
        o.unhealthy_count(Kind::Controller) == 0 && o.unhealthy_count(Kind::NodeVolume) == 0
    })
    .await;
    Ok(lags)
}

/// Storage conditions node by node, in rounds until `samples` were seen.
async fn storage_lag(cluster: &Cluster, obs: &Observer, k: &Knobs) -> Result<Lag> {
    let nodes: Vec<String> = {
        let mut n: Vec<String> = cluster
            .volumes
            .iter()
            .map(|v| v.sample.node.clone())
            .collect();
        n.sort();
        n.dedup();
        n
    };
    println!("  detection lag: {} storage conditions", k.samples);
    let per_round = nodes.len().min(k.samples).max(1);
    let stagger = k.agent_interval / 7;
    let timeout = k.agent_interval * 10 + Duration::from_secs(30);
    let mut injected = Vec::new();
    while injected.len() < k.samples {
        let mut round = Vec::new();
        for node in nodes.iter().take(per_round.min(k.samples - injected.len())) {
            inject_storage(cluster, node)?;
            round.push((node.clone(), Instant::now()));
            tokio::time::sleep(stagger).await;
        }
        obs.wait(timeout, |o| {
            round
                .iter()
                .all(|(n, at)| o.first(Kind::NodeStorage, n, true, *at).is_some())
        })
        .await;
        clear_storage(cluster)?;
        obs.wait(timeout, |o| o.unhealthy_count(Kind::NodeStorage) == 0)
            .await;
        injected.extend(round);
    }
    Ok(lag_of(obs, Kind::NodeStorage, &injected))
}

/// The correlated failure's volumes: `count` spread evenly over all of them.
fn spread(volumes: &[Volume], count: usize) -> Vec<&Volume> {
    let n = volumes.len();
    (0..count).map(|i| &volumes[i * n / count.max(1)]).collect()
}

/// Changes the injections with `change`, then follows `kind` objects to `unhealthy` until
/// `count` got there.
async fn burst(
    cluster: &Cluster,
    obs: &Observer,
    k: &Knobs,
    count: usize,
    unhealthy: bool,
    change: impl FnOnce() -> Result<()>,
) -> Result<Burst> {
    let before = counters(cluster).await?;
    change()?;
    let t0 = Instant::now();
    let reached = obs
        .wait(k.wait, |o| {
            let sick = o.unhealthy_count(Kind::Controller);
            if unhealthy { sick >= count } else { sick == 0 }
        })
        .await;
    let after = counters(cluster).await?;
    if !reached {
        println!(
            "    not every volume reached status within --wait {:?}",
            k.wait
        );
    }
    let mut b = Burst::of(obs.curve(Kind::Controller, unhealthy, t0), count);
    b.events = events(&after.api) - events(&before.api);
    b.get_rpcs = probe::probes(&after.monitor, GET) - probe::probes(&before.monitor, GET);
    Ok(b)
}

fn snapshot(cluster: &Cluster) -> Resources {
    let mut groups: std::collections::BTreeMap<&str, Vec<ProcStat>> = Default::default();
    for (name, pid) in cluster.pids() {
        let group = match name.as_str() {
            "apiserver" => "apiserver",
            "driver-controller" => "driver_controller",
            "monitor" => "monitor",
            n if n.starts_with("driver-") => "node_plugins",
            n if n.starts_with("agent-") => "agents",
            _ => continue,
        };
        if let Some(s) = probe::proc_stat(pid) {
            groups.entry(group).or_default().push(s);
        }
    }
    let g = |name: &str| Group::of(groups.get(name).map(Vec::as_slice).unwrap_or_default());
    let monitor = g("monitor");
    Resources {
        apiserver: g("apiserver"),
        driver_controller: g("driver_controller"),
        node_plugins: g("node_plugins"),
        monitor_rss_mib_per_1000_pvcs: monitor.max_rss_mib
            / (cluster.volumes.len().max(1) as f64 / 1000.0),
        monitor,
        agents: g("agents"),
        bench: Group::of(
            &probe::proc_stat(std::process::id())
                .into_iter()
                .collect::<Vec<_>>(),
        ),
    }
}

/// Runs every measurement on a started cluster.
pub async fn measure(cluster: &mut Cluster, k: Knobs) -> Result<Report> {
    let mut report = Report {
        setup_s: k.started.elapsed().as_secs_f64(),
        ..Report::default()
    };
    println!(
        "  setup took {:.1} s; watching every PVC, pod and CSINode",
        report.setup_s
    );
    let obs = Observer::start(&cluster.client, NAMESPACE).await?;
    // Let the first cycles (the monitor's and agents' initial sweeps) pass.
    tokio::time::sleep(k.slowest() * 3).await;
    report.healthy = steady(cluster, &k, "all healthy").await?;
    report.resources = snapshot(cluster);

    let (ctl, node) = volume_lags(cluster, &obs, &k).await?;
    report.lag.controller = ctl;
    report.lag.node_volume = node;
    report.lag.node_storage = storage_lag(cluster, &obs, &k).await?;

    let failing: Vec<Volume> = spread(&cluster.volumes, k.unhealthy)
        .into_iter()
        .cloned()
        .collect();
    let refs: Vec<&Volume> = failing.iter().collect();
    println!(
        "  correlated failure: {} volumes turn Inaccessible at once",
        refs.len()
    );
    report.failure = burst(cluster, &obs, &k, refs.len(), true, || {
        inject_volumes(cluster, &refs, Side::Controller)
    })
    .await?;
    report.unhealthy = steady(cluster, &k, "with the failure on status").await?;

    println!("  restarting the monitor with the conditions present");
    let before = counters(cluster).await?;
    cluster.restart_monitor().await?;
    tokio::time::sleep(k.window).await;
    let after = counters(cluster).await?;
    report.restart = Restart {
        pvc_status_patches: probe::status_patches(&after.api, "persistentvolumeclaims")
            - probe::status_patches(&before.api, "persistentvolumeclaims"),
        window_s: after.at.duration_since(before.at).as_secs_f64(),
    };

    println!(
        "  recovery: the {} volumes turn healthy at once",
        refs.len()
    );
    report.recovery = burst(cluster, &obs, &k, refs.len(), false, || {
        clear_volumes(cluster, &refs)
    })
    .await?;
    if let Some(why) = cluster.exited() {
        bail!("a component stopped during the bench: {why}");
    }
    Ok(report)
}
