//! The standard `process_*` metrics of the running process, read from `/proc/self`.
//!
//! Names, types and units are the ones every Prometheus client library exports, so the usual
//! dashboards and alerts work unchanged. On a system without `/proc` the families are left out.

use crate::negotiation::Format;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// Clock ticks per second of the times in `/proc/<pid>/stat` (`USER_HZ`): 100 on every
/// architecture Linux exports through procfs, whatever the kernel's internal tick rate.
const USER_HZ: f64 = 100.0;

/// What `/proc/self` says about this process.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident set size, in bytes.
    pub resident_memory_bytes: u64,
    /// Virtual memory size, in bytes.
    pub virtual_memory_bytes: u64,
    /// Start time, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors.
    pub max_fds: Option<u64>,
}

/// Fields of `/proc/self/stat` after the command name (which may hold spaces).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after = stat.rsplit_once(')')?.1;
    Some(after.split_whitespace().collect())
}

/// A `Key:   N kB` line of `/proc/self/status`, in bytes.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..]
        .trim_start_matches(':')
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The soft "Max open files" limit of `/proc/self/limits` (`None` when unlimited).
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The boot time (`btime`) of `/proc/stat`, in seconds since the Unix epoch.
fn boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

impl ProcessStats {
    /// Parses the contents of `/proc/self/stat`, `/proc/self/status`, `/proc/self/limits` and
    /// `/proc/stat`, with `open_fds` counted by the caller.
    pub fn parse(
        stat: &str,
        status: &str,
        limits: &str,
        proc_stat: &str,
        open_fds: u64,
    ) -> Option<ProcessStats> {
        // After the command: state is field 3 of stat(5), so utime (14) is at index 11 here.
        let fields = stat_fields(stat)?;
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
        let cpu_seconds = (ticks(11)? + ticks(12)?) / USER_HZ;
        let start_ticks = ticks(19)?;
        Some(ProcessStats {
            cpu_seconds,
            resident_memory_bytes: status_kib(status, "VmRSS").unwrap_or(0),
            virtual_memory_bytes: status_kib(status, "VmSize").unwrap_or(0),
            start_time_seconds: boot_time(proc_stat)? + start_ticks / USER_HZ,
            open_fds,
            max_fds: max_open_files(limits),
        })
    }

    /// Reads this process's figures; `None` without a readable `/proc`.
    pub fn read() -> Option<ProcessStats> {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        ProcessStats::parse(
            &read("/proc/self/stat")?,
            &read("/proc/self/status")?,
            &read("/proc/self/limits").unwrap_or_default(),
            &read("/proc/stat")?,
            // The directory handle used to count is itself one of the entries.
            open_fds.saturating_sub(1),
        )
    }

    /// Writes the families to `encoder`, in whichever exposition format it writes.
    pub fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        fn family<M: EncodeMetric>(
            encoder: &mut DescriptorEncoder,
            name: &str,
            unit: Option<&Unit>,
            help: &str,
            metric: M,
        ) -> Result<(), std::fmt::Error> {
            metric.encode(encoder.encode_descriptor(name, help, unit, metric.metric_type())?)
        }
        family(
            encoder,
            "process_cpu",
            Some(&Unit::Seconds),
            "CPU time (user and system) the process has used.",
            ConstCounter::new(self.cpu_seconds),
        )?;
        family(
            encoder,
            "process_resident_memory",
            Some(&Unit::Bytes),
            "Memory of the process resident in RAM.",
            ConstGauge::new(gauge(self.resident_memory_bytes)),
        )?;
        family(
            encoder,
            "process_virtual_memory",
            Some(&Unit::Bytes),
            "Virtual memory size of the process.",
            ConstGauge::new(gauge(self.virtual_memory_bytes)),
        )?;
        family(
            encoder,
            "process_start_time",
            Some(&Unit::Seconds),
            "When the process started, in seconds since the Unix epoch.",
            ConstGauge::new(self.start_time_seconds),
        )?;
        family(
            encoder,
            "process_open_fds",
            None,
            "File descriptors the process has open.",
            ConstGauge::new(gauge(self.open_fds)),
        )?;
        if let Some(max) = self.max_fds {
            family(
                encoder,
                "process_max_fds",
                None,
                "Most file descriptors the process may open (soft limit).",
                ConstGauge::new(gauge(max)),
            )?;
        }
        Ok(())
    }

    /// The families in OpenMetrics text (without `# EOF`).
    pub fn openmetrics(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Fixed(self.clone())));
        crate::metrics_text::encode_as(&registry, Format::OpenMetrics)
    }
}

/// A gauge's value: the counts here stay far below `i64::MAX`, and saturate if not.
fn gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The families of stats read once (for [`ProcessStats::openmetrics`]).
#[derive(Debug)]
struct Fixed(ProcessStats);

impl Collector for Fixed {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(&mut encoder)
    }
}

/// The current process's families, read from `/proc` at every scrape; nothing without `/proc`.
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        match ProcessStats::read() {
            Some(s) => s.encode(&mut encoder),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (vol health) S 1 4242 4242 0 -1 4194560 1534 0 0 0 250 50 0 0 20 0 8 0 12345 1000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
    const STATUS: &str = "Name:\tvolhealth\nVmSize:\t  123456 kB\nVmRSS:\t    2048 kB\n";
    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
    const PROC_STAT: &str = "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n";

    #[test]
    fn parses_the_proc_files() {
        let s = ProcessStats::parse(STAT, STATUS, LIMITS, PROC_STAT, 9).unwrap();
        assert_eq!(
            s,
            ProcessStats {
                cpu_seconds: 3.0,
                resident_memory_bytes: 2048 * 1024,
                virtual_memory_bytes: 123456 * 1024,
                start_time_seconds: 1_700_000_000.0 + 123.45,
                open_fds: 9,
                max_fds: Some(1024),
            }
        );
        let unlimited = LIMITS.replace("1024                 524288", "unlimited unlimited");
        let s = ProcessStats::parse(STAT, STATUS, &unlimited, PROC_STAT, 9).unwrap();
        assert_eq!(s.max_fds, None);
        assert!(ProcessStats::parse("garbage", STATUS, LIMITS, PROC_STAT, 1).is_none());
    }

    fn now_seconds() -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    }

    #[test]
    fn reads_this_process() {
        let s = ProcessStats::read().expect("/proc is readable in tests");
        assert!(s.resident_memory_bytes > 0 && s.open_fds > 0, "{s:?}");
        assert!(s.start_time_seconds > 1_000_000_000.0, "{s:?}");
        assert!(s.start_time_seconds <= now_seconds() + 1.0, "{s:?}");
        let text = s.openmetrics();
        for family in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_start_time_seconds ",
            "process_open_fds ",
            "process_max_fds ",
        ] {
            assert!(text.contains(family), "{family} missing from:\n{text}");
        }
    }
}
