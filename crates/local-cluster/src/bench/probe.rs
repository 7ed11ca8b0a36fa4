//! What the bench reads from the running processes: Prometheus pages (the API server's with the
//! bench's client, the others over plain HTTP), and
//! resident memory and CPU time from `/proc`.

use crate::failure::Context as _;
use crate::failure::{Result, ensure};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The body of `GET url` (plain `http://HOST:PORT/PATH`, loopback servers only).
pub async fn http_get(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{url} is not a plain http:// URL"))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut stream = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("connecting to {host}"))?;
    let req = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(req.as_bytes())
        .await
        .with_context(|| format!("sending GET {url}"))?;
    let mut buf = Vec::new();
    stream
        .read_to_end(&mut buf)
        .await
        .with_context(|| format!("reading the answer to GET {url}"))?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("GET {url}: no HTTP header"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    ensure!(status == "200", "GET {url} answered {status}");
    Ok(body.to_string())
}

/// The API server's `/metrics` page, read over its TLS connection with the bench's credentials.
pub async fn api_metrics(client: &kube::Client) -> Result<String> {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .context("building GET /metrics")?;
    Ok(client.request_text(req).await?)
}

/// The sum of the samples of `name` whose labels contain every one of `labels`
/// (each spelled `key="value"`).
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = match series.find('{') {
                Some(i) => (&series[..i], &series[i..]),
                None => (series, ""),
            };
            (metric == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// The writes the API server has answered: every POST, PUT, PATCH and DELETE.
pub fn api_writes(text: &str) -> f64 {
    ["POST", "PUT", "PATCH", "DELETE"]
        .iter()
        .map(|verb| {
            metric_sum(
                text,
                "apiserver_request_total",
                &[&format!("verb=\"{verb}\"")],
            )
        })
        .sum()
}

/// The status PATCHes of `resource` the API server has answered.
pub fn status_patches(text: &str, resource: &str) -> f64 {
    metric_sum(
        text,
        "apiserver_request_total",
        &[
            "verb=\"PATCH\"",
            &format!("resource=\"{resource}\""),
            "subresource=\"status\"",
        ],
    )
}

/// The probe cycles the monitor has finished, the seconds they took, and how many overran.
pub fn cycles(text: &str) -> (f64, f64, f64) {
    (
        metric_sum(text, "csi_volume_health_cycle_duration_seconds_count", &[]),
        metric_sum(text, "csi_volume_health_cycle_duration_seconds_sum", &[]),
        metric_sum(text, "csi_volume_health_cycle_overruns_total", &[]),
    )
}

/// The health RPCs of `method` the monitor or an agent has made.
pub fn probes(text: &str, method: &str) -> f64 {
    metric_sum(
        text,
        "csi_volume_health_probe_total",
        &[&format!("method=\"{method}\"")],
    )
}

/// Memory and CPU of one process.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ProcStat {
    /// Resident memory now, MiB.
    pub rss_mib: f64,
    /// Highest resident memory, MiB.
    pub hwm_mib: f64,
    /// The part of the resident memory that is the process's own (`RssAnon`), MiB. The rest is
    /// mostly the binary's pages, which every process started from it shares.
    pub anon_mib: f64,
    /// User plus system CPU time since the process started, seconds.
    pub cpu_s: f64,
}

fn status_kib(status: &str, key: &str) -> f64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// Reads `/proc/PID/status` and `/proc/PID/stat`; `None` when the process is gone.
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3 (state).
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|h| *h > 0)
        .unwrap_or(100) as f64;
    Some(ProcStat {
        rss_mib: status_kib(&status, "VmRSS:") / 1024.0,
        hwm_mib: status_kib(&status, "VmHWM:") / 1024.0,
        anon_mib: status_kib(&status, "RssAnon:") / 1024.0,
        cpu_s: ticks / hz,
    })
}

/// The machine's CPU time so far, from the first line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MachineCpu {
    /// Every state: user, nice, system, idle, iowait, irq, softirq, steal.
    pub total: f64,
    /// Idle and waiting for I/O.
    pub idle: f64,
    /// Taken by the hypervisor for other guests while this machine had work to run.
    pub steal: f64,
}

impl MachineCpu {
    /// The busy and stolen shares of the CPU time between `self` and a later reading, percent.
    pub fn shares_until(&self, later: &MachineCpu) -> (f64, f64) {
        let total = later.total - self.total;
        if total <= 0.0 {
            return (0.0, 0.0);
        }
        let idle = later.idle - self.idle;
        let steal = later.steal - self.steal;
        (
            100.0 * (total - idle - steal).max(0.0) / total,
            100.0 * steal.max(0.0) / total,
        )
    }
}

/// Parses the aggregate `cpu` line of `/proc/stat`.
pub fn parse_machine_cpu(stat: &str) -> Option<MachineCpu> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse::<f64>().ok())
        .collect::<Option<_>>()?;
    if v.len() < 8 {
        return None;
    }
    Some(MachineCpu {
        total: v.iter().sum(),
        idle: v[3] + v[4],
        steal: v[7],
    })
}

/// Reads the machine's CPU time; `None` where `/proc/stat` is missing or unreadable.
pub fn machine_cpu() -> Option<MachineCpu> {
    parse_machine_cpu(&std::fs::read_to_string("/proc/stat").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_sum_adds_the_matching_series_only() {
        let text = "# HELP x\napiserver_request_total{verb=\"PATCH\",resource=\"pods\",subresource=\"status\",code=\"200\"} 3\n\
                    apiserver_request_total{verb=\"PATCH\",resource=\"pods\",subresource=\"status\",code=\"409\"} 1\n\
                    apiserver_request_total{verb=\"POST\",resource=\"events\",code=\"201\"} 2\n\
                    apiserver_request_total_other{verb=\"PATCH\"} 100\n";
        assert_eq!(status_patches(text, "pods"), 4.0);
        assert_eq!(status_patches(text, "persistentvolumeclaims"), 0.0);
        assert_eq!(api_writes(text), 6.0);
    }

    #[test]
    fn machine_cpu_shares_count_steal_apart_from_busy() {
        let a =
            parse_machine_cpu("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8\n").unwrap();
        assert_eq!(a.total, 1000.0);
        let b = parse_machine_cpu("cpu  200 0 100 900 50 0 0 150 0 0\n").unwrap();
        let (busy, steal) = a.shares_until(&b);
        assert!((busy - 37.5).abs() < 1e-9, "{busy}");
        assert!((steal - 37.5).abs() < 1e-9, "{steal}");
        assert_eq!(b.shares_until(&b), (0.0, 0.0));
        assert!(parse_machine_cpu("cpu  1 2 3\n").is_none());
        assert!(parse_machine_cpu("intr 5\n").is_none());
    }

    #[test]
    fn this_process_has_memory_and_cpu() {
        let me = proc_stat(std::process::id()).unwrap();
        assert!(me.rss_mib > 0.0 && me.hwm_mib >= me.rss_mib, "{me:?}");
        assert!(me.anon_mib > 0.0 && me.anon_mib <= me.rss_mib, "{me:?}");
        assert!(proc_stat(u32::MAX).is_none());
    }
}
