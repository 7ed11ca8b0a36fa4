//! The bench's results: one serializable record, printed as a table and written as JSON.

use super::probe::ProcStat;
use serde::Serialize;

/// What the bench ran with.
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    /// PVCs (each with a PV and a pod).
    pub pvcs: usize,
    /// Nodes (one node plugin and one agent each).
    pub nodes: usize,
    /// The monitor's interval, seconds.
    pub interval_s: f64,
    /// The agents' interval, seconds.
    pub agent_interval_s: f64,
    /// `list` or `get`.
    pub mode: super::cluster::Mode,
    /// The monitor's list page size.
    pub page_size: u32,
    /// Volumes of the correlated failure.
    pub unhealthy_volumes: usize,
    /// Each steady-state window, seconds.
    pub window_s: f64,
    /// Extra monitor flags.
    pub monitor_flags: Vec<String>,
    /// CPUs this machine offers.
    pub cpus: usize,
    /// Whether this binary was built with optimizations.
    pub release_build: bool,
}

/// A steady-state window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Steady {
    /// POST, PUT, PATCH and DELETE requests per minute (every client).
    pub writes_per_min: f64,
    /// Status PATCHes of PVCs, pods and CSINodes per minute.
    pub status_patches_per_min: f64,
    /// The same, per resource (`persistentvolumeclaims`, `pods`, `csinodes`).
    pub status_patches_per_min_by_resource: std::collections::BTreeMap<String, f64>,
    /// ControllerListVolumeHealth RPCs per monitor cycle.
    pub list_rpcs_per_cycle: f64,
    /// ControllerGetVolumeHealth RPCs per monitor cycle.
    pub get_rpcs_per_cycle: f64,
    /// The monitor's CPU per cycle per 1,000 PVCs, milliseconds.
    pub monitor_cpu_ms_per_cycle_per_1000: f64,
    /// Monitor cycles that ended in the window.
    pub cycles_ended: f64,
    /// Of them, those that ended after the next cycle was due (a Get sweep that did not fit in
    /// its interval).
    pub cycle_overruns: f64,
    /// Their mean duration, seconds.
    pub cycle_mean_s: f64,
    /// Whether the window ran from just after one cycle's end to just after another's, so it
    /// held whole cycles and the figures above are per cycle; if not, they are per interval.
    pub cycle_aligned: bool,
    /// The machine's CPU time spent running anything, percent of all its CPUs' time.
    pub machine_busy_pct: f64,
    /// The machine's CPU time taken by the hypervisor for other guests (steal), percent: what
    /// a shared virtual machine loses, which no component here can win back.
    pub machine_steal_pct: f64,
}

/// Detection lag of one kind of condition.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Lag {
    /// Conditions injected.
    pub injected: usize,
    /// Conditions seen on status (the samples).
    pub samples: usize,
    /// Median, seconds.
    pub p50_s: f64,
    /// 99th percentile, seconds.
    pub p99_s: f64,
    /// Longest, seconds.
    pub max_s: f64,
    /// Every sample, seconds, sorted.
    pub values_s: Vec<f64>,
}

impl Lag {
    /// Summarizes `values` (seconds) out of `injected`.
    pub fn of(mut values: Vec<f64>, injected: usize) -> Lag {
        values.sort_by(f64::total_cmp);
        Lag {
            injected,
            samples: values.len(),
            p50_s: percentile(&values, 0.50),
            p99_s: percentile(&values, 0.99),
            max_s: values.last().copied().unwrap_or(0.0),
            values_s: values,
        }
    }
}

/// Nearest-rank percentile of sorted `values` (0 when empty).
pub fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let rank = (q * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// Detection lags of the three kinds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Lags {
    /// `pvc.status.healthStatus`.
    pub controller: Lag,
    /// `pod.status.volumeHealth`.
    pub node_volume: Lag,
    /// `csinode.status.storageHealth`.
    pub node_storage: Lag,
}

/// Many volumes changing at once.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Burst {
    /// Volumes changed.
    pub volumes: usize,
    /// How many reached status before the bench stopped waiting.
    pub on_status: usize,
    /// Seconds until the first min(500, volumes) were on status.
    pub first_500_s: Option<f64>,
    /// Seconds until all were on status.
    pub all_s: Option<f64>,
    /// Events created meanwhile (until all were on status, or the wait ended).
    pub events: f64,
    /// ControllerGetVolumeHealth RPCs the monitor made meanwhile.
    pub get_rpcs: f64,
    /// When each volume reached status, seconds after the change, sorted.
    pub curve_s: Vec<f64>,
}

impl Burst {
    /// Summarizes the arrival times `curve` of `volumes` changes.
    pub fn of(curve: Vec<f64>, volumes: usize) -> Burst {
        let first = volumes.min(500);
        Burst {
            volumes,
            on_status: curve.len(),
            first_500_s: (curve.len() >= first && first > 0).then(|| curve[first - 1]),
            all_s: (curve.len() >= volumes && volumes > 0).then(|| curve[volumes - 1]),
            events: 0.0,
            get_rpcs: 0.0,
            curve_s: curve,
        }
    }
}

/// Writes after the monitor restarted with conditions present.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Restart {
    /// PVC status PATCHes in the window after the restart.
    pub pvc_status_patches: f64,
    /// The window, seconds.
    pub window_s: f64,
}

/// Memory and CPU of a group of like processes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Group {
    /// Processes in the group.
    pub count: usize,
    /// Mean resident memory, MiB.
    pub mean_rss_mib: f64,
    /// Largest resident memory, MiB.
    pub max_rss_mib: f64,
    /// Largest high-water resident memory, MiB.
    pub max_hwm_mib: f64,
    /// Largest private (anonymous) resident memory, MiB: what each process adds on its own.
    pub max_anon_mib: f64,
    /// CPU time of the whole group over the run, seconds.
    pub cpu_s: f64,
}

impl Group {
    /// Summarizes `stats`.
    pub fn of(stats: &[ProcStat]) -> Group {
        let n = stats.len().max(1) as f64;
        Group {
            count: stats.len(),
            mean_rss_mib: stats.iter().map(|s| s.rss_mib).sum::<f64>() / n,
            max_rss_mib: stats.iter().map(|s| s.rss_mib).fold(0.0, f64::max),
            max_hwm_mib: stats.iter().map(|s| s.hwm_mib).fold(0.0, f64::max),
            max_anon_mib: stats.iter().map(|s| s.anon_mib).fold(0.0, f64::max),
            cpu_s: stats.iter().map(|s| s.cpu_s).sum(),
        }
    }
}

/// Memory and CPU of every component, read at the end of the healthy window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Resources {
    /// The embedded API server.
    pub apiserver: Group,
    /// The driver's controller plugin.
    pub driver_controller: Group,
    /// The node plugins.
    pub node_plugins: Group,
    /// The monitor (before its restart).
    pub monitor: Group,
    /// The monitor's resident memory per 1,000 PVCs, MiB.
    pub monitor_rss_mib_per_1000_pvcs: f64,
    /// The agents.
    pub agents: Group,
    /// The bench itself (its watches hold every PVC, pod and CSINode).
    pub bench: Group,
}

/// Everything one bench run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// The configuration.
    pub setup: Option<Setup>,
    /// Seconds from start to every object created and every component running.
    pub setup_s: f64,
    /// All volumes healthy.
    pub healthy: Steady,
    /// Detection lags.
    pub lag: Lags,
    /// The correlated failure reaching status.
    pub failure: Burst,
    /// With the correlated failure on status.
    pub unhealthy: Steady,
    /// Monitor restart with the conditions present.
    pub restart: Restart,
    /// The correlated failure clearing.
    pub recovery: Burst,
    /// Memory and CPU.
    pub resources: Resources,
}

fn opt(v: Option<f64>) -> String {
    v.map(|s| format!("{s:.2} s"))
        .unwrap_or_else(|| "not reached".into())
}

/// One group's row of the table.
fn group(g: &Group) -> String {
    format!(
        "{:.1} MiB (max {:.1}, high-water {:.1}, private {:.1}), CPU {:.1} s",
        g.mean_rss_mib, g.max_rss_mib, g.max_hwm_mib, g.max_anon_mib, g.cpu_s
    )
}

impl Report {
    /// The table printed at the end: `(figure, measured)` rows.
    pub fn rows(&self) -> Vec<(String, String)> {
        let f = &self.failure;
        let r = &self.recovery;
        let lag = |l: &Lag| {
            format!(
                "{:.2} s / {:.2} s ({} samples)",
                l.p50_s, l.p99_s, l.samples
            )
        };
        vec![
            ("setup".into(), format!("{:.1} s", self.setup_s)),
            (
                "steady writes/min, all healthy".into(),
                format!(
                    "{:.1} (status PATCHes {:.1})",
                    self.healthy.writes_per_min, self.healthy.status_patches_per_min
                ),
            ),
            (
                format!("steady writes/min, {} unhealthy", f.volumes),
                format!(
                    "{:.1} (status PATCHes {:.1})",
                    self.unhealthy.writes_per_min, self.unhealthy.status_patches_per_min
                ),
            ),
            (
                "list / get RPCs per cycle".into(),
                format!(
                    "{:.1} / {:.1}",
                    self.healthy.list_rpcs_per_cycle, self.healthy.get_rpcs_per_cycle
                ),
            ),
            (
                "monitor cycles, healthy".into(),
                format!(
                    "{:.0} ended, {:.0} overran, mean {:.3} s{}",
                    self.healthy.cycles_ended,
                    self.healthy.cycle_overruns,
                    self.healthy.cycle_mean_s,
                    if self.healthy.cycle_aligned {
                        ""
                    } else {
                        " (window not at cycle ends: RPCs per interval)"
                    }
                ),
            ),
            (
                "machine CPU busy / stolen, healthy".into(),
                format!(
                    "{:.0}% / {:.0}%",
                    self.healthy.machine_busy_pct, self.healthy.machine_steal_pct
                ),
            ),
            ("lag controller p50 / p99".into(), lag(&self.lag.controller)),
            (
                "lag node volume p50 / p99".into(),
                lag(&self.lag.node_volume),
            ),
            (
                "lag node storage p50 / p99".into(),
                lag(&self.lag.node_storage),
            ),
            (
                format!(
                    "{} unhealthy: first {} / all on status",
                    f.volumes,
                    f.volumes.min(500)
                ),
                format!("{} / {}", opt(f.first_500_s), opt(f.all_s)),
            ),
            ("  Events meanwhile".into(), format!("{}", f.events)),
            (
                format!(
                    "{} recover: first {} / all cleared",
                    r.volumes,
                    r.volumes.min(500)
                ),
                format!("{} / {}", opt(r.first_500_s), opt(r.all_s)),
            ),
            ("  confirming Gets".into(), format!("{}", r.get_rpcs)),
            (
                "writes after monitor restart".into(),
                format!(
                    "{} PVC status PATCHes in {:.1} s",
                    self.restart.pvc_status_patches, self.restart.window_s
                ),
            ),
            ("apiserver".into(), group(&self.resources.apiserver)),
            (
                "driver controller".into(),
                group(&self.resources.driver_controller),
            ),
            ("node plugins".into(), group(&self.resources.node_plugins)),
            ("monitor".into(), self.monitor_row()),
            ("agents".into(), group(&self.resources.agents)),
            ("bench (watches)".into(), group(&self.resources.bench)),
        ]
    }

    /// The monitor's row: its resources, and per-1,000-PVC figures only where they mean
    /// something. Below 1,000 PVCs the process's fixed cost dominates and dividing it by a few
    /// hundred claims gives a figure many times the real one; the build profile is named
    /// because a debug build is several times larger and slower than the sidecar image.
    fn monitor_row(&self) -> String {
        let mut row = group(&self.resources.monitor);
        if let Some(setup) = self.setup.as_ref().filter(|s| s.pvcs >= PER_1000_FROM) {
            let profile = if setup.release_build {
                "release build"
            } else {
                "debug build"
            };
            row.push_str(&format!(
                "; {:.2} MiB per 1,000 PVCs; {:.1} ms CPU per cycle per 1,000 ({profile})",
                self.resources.monitor_rss_mib_per_1000_pvcs,
                self.healthy.monitor_cpu_ms_per_cycle_per_1000
            ));
        }
        row
    }

    /// The table as text.
    pub fn table(&self) -> String {
        let rows = self.rows();
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        rows.iter()
            .map(|(k, v)| format!("  {k:<width$}  {v}\n"))
            .collect()
    }
}

/// The smallest bench whose per-1,000-PVC figures the table shows.
pub const PER_1000_FROM: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 10.0);
        assert_eq!(percentile(&v, 0.99), 20.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn per_1000_figures_only_from_1000_pvcs_and_with_the_profile() {
        let report = |pvcs: usize, release_build: bool| Report {
            setup: Some(Setup {
                pvcs,
                nodes: 1,
                interval_s: 1.0,
                agent_interval_s: 1.0,
                mode: super::super::cluster::Mode::List,
                page_size: 500,
                unhealthy_volumes: 0,
                window_s: 1.0,
                monitor_flags: Vec::new(),
                cpus: 2,
                release_build,
            }),
            ..Default::default()
        };
        assert!(!report(200, false).monitor_row().contains("per 1,000"));
        assert!(report(5000, false).monitor_row().contains("(debug build)"));
        assert!(report(1000, true).monitor_row().contains("per 1,000 PVCs"));
        assert!(report(1000, true).monitor_row().contains("(release build)"));
    }

    #[test]
    fn a_burst_reports_the_first_500_and_all() {
        let curve: Vec<f64> = (1..=600).map(|i| f64::from(i) / 100.0).collect();
        let b = Burst::of(curve.clone(), 600);
        assert_eq!(b.first_500_s, Some(5.0));
        assert_eq!(b.all_s, Some(6.0));
        let short = Burst::of(curve[..10].to_vec(), 20);
        assert_eq!(short.first_500_s, None);
        assert_eq!(short.all_s, None);
        assert_eq!(short.on_status, 10);
    }
}
