//! Results of a run: one outcome per named case, latency figures, and the human summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The driver follows the rule.
    Pass,
    /// The driver breaks the rule; the text says how.
    Fail(String),
    /// The case could not run; the text says why (usually a capability the driver lacks).
    Skip(String),
}

impl Outcome {
    /// `PASS`, `FAIL` or `SKIP`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail(_) => "FAIL",
            Outcome::Skip(_) => "SKIP",
        }
    }

    /// The failure or skip reason; empty for a pass.
    pub fn reason(&self) -> &str {
        match self {
            Outcome::Pass => "",
            Outcome::Fail(r) | Outcome::Skip(r) => r,
        }
    }
}

/// A named check of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    /// Stable dotted name, e.g. `controller.get.unknown_volume_not_found`.
    pub name: &'static str,
    /// Where the rule comes from.
    pub spec: &'static str,
    /// What the case checks, in one sentence.
    pub description: &'static str,
}

/// One case's result.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// How it ended.
    pub outcome: Outcome,
    /// How long it took.
    pub duration: Duration,
    /// Figures the case reports without judging them (latency), one per line.
    pub notes: Vec<String>,
}

/// Latency of one RPC over the whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Latency {
    /// gRPC method name.
    pub rpc: String,
    /// Number of calls.
    pub calls: usize,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
}

/// Computes p50 and p99 per RPC from every call's duration.
pub fn latencies(samples: &BTreeMap<String, Vec<Duration>>) -> Vec<Latency> {
    samples
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(rpc, v)| {
            let mut v = v.clone();
            v.sort();
            let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
            Latency {
                rpc: rpc.clone(),
                calls: v.len(),
                p50: at(0.50),
                p99: at(0.99),
            }
        })
        .collect()
}

/// Everything a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// `GetPluginInfo` name and vendor version, when the driver answered.
    pub driver: String,
    /// Results in the order the cases ran.
    pub results: Vec<CaseResult>,
    /// Per-RPC latency over every call of the run.
    pub latency: Vec<Latency>,
    /// Whether the run was cut short (Ctrl-C); cases not run are missing.
    pub interrupted: bool,
    /// Problems while cleaning up (a volume that could not be deleted, an injection not cleared).
    pub cleanup_problems: Vec<String>,
    /// Total time of the run.
    pub duration: Duration,
}

impl Report {
    /// Number of results with this label.
    pub fn count(&self, label: &str) -> usize {
        self.results
            .iter()
            .filter(|r| r.outcome.label() == label)
            .count()
    }

    /// True when no case failed, the run was complete and cleanup worked.
    pub fn success(&self) -> bool {
        self.count("FAIL") == 0 && !self.interrupted && self.cleanup_problems.is_empty()
    }

    /// The summary printed at the end: a table of every case, latency, totals.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let width = self
            .results
            .iter()
            .map(|r| r.case.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(s, "\nconformance summary for {}", self.driver);
        let _ = writeln!(s, "{:<8}{:<width$}  REASON", "RESULT", "CASE");
        for r in &self.results {
            let line = format!(
                "{:<8}{:<width$}  {}",
                r.outcome.label(),
                r.case.name,
                r.outcome.reason()
            );
            let _ = writeln!(s, "{}", line.trim_end());
        }
        if !self.latency.is_empty() {
            let w = self.latency.iter().map(|l| l.rpc.len()).max().unwrap_or(3);
            let _ = writeln!(s, "\nlatency (reported, not judged)");
            let _ = writeln!(
                s,
                "{:<w$}  {:>6}  {:>10}  {:>10}",
                "RPC", "CALLS", "P50", "P99"
            );
            for l in &self.latency {
                let _ = writeln!(
                    s,
                    "{:<w$}  {:>6}  {:>10}  {:>10}",
                    l.rpc,
                    l.calls,
                    format_duration(l.p50),
                    format_duration(l.p99)
                );
            }
        }
        for r in self.results.iter().filter(|r| !r.notes.is_empty()) {
            for n in &r.notes {
                let _ = writeln!(s, "{n}");
            }
        }
        for p in &self.cleanup_problems {
            let _ = writeln!(s, "cleanup: {p}");
        }
        if self.interrupted {
            let _ = writeln!(s, "interrupted: the run was stopped before every case ran");
        }
        let _ = writeln!(
            s,
            "\n{} passed, {} failed, {} skipped in {}",
            self.count("PASS"),
            self.count("FAIL"),
            self.count("SKIP"),
            format_duration(self.duration)
        );
        s
    }
}

/// `1.2 ms`, `340 µs`, `2.5 s`; `<1 µs` for what took less than a microsecond (never `0 µs`,
/// which reads as a measurement that failed).
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        "<1 µs".to_string()
    } else if us < 1000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else {
        format!("{:.1} s", us as f64 / 1_000_000.0)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_as_measurements() {
        use super::format_duration;
        assert_eq!(format_duration(Duration::from_nanos(300)), "<1 µs");
        assert_eq!(format_duration(Duration::from_micros(340)), "340 µs");
        assert_eq!(format_duration(Duration::from_micros(1200)), "1.2 ms");
        assert_eq!(format_duration(Duration::from_millis(2500)), "2.5 s");
    }

    use super::*;

    #[test]
    fn percentiles_pick_the_ranked_sample() {
        let mut samples = BTreeMap::new();
        samples.insert(
            "Get".to_string(),
            (1..=100).map(Duration::from_millis).collect::<Vec<_>>(),
        );
        samples.insert("One".to_string(), vec![Duration::from_millis(7)]);
        let l = latencies(&samples);
        assert_eq!(l[0].p50, Duration::from_millis(50));
        assert_eq!(l[0].p99, Duration::from_millis(99));
        assert_eq!(l[0].calls, 100);
        assert_eq!(
            (l[1].p50, l[1].p99),
            (Duration::from_millis(7), Duration::from_millis(7))
        );
    }

    #[test]
    fn success_needs_no_failure_and_a_complete_clean_run() {
        let case = Case {
            name: "a.b",
            spec: "s",
            description: "d",
        };
        let mut r = Report::default();
        r.results.push(CaseResult {
            case,
            outcome: Outcome::Skip("no capability".into()),
            duration: Duration::ZERO,
            notes: vec![],
        });
        assert!(r.success());
        r.interrupted = true;
        assert!(!r.success());
        r.interrupted = false;
        r.results[0].outcome = Outcome::Fail("broken".into());
        assert!(!r.success());
        assert!(r.summary().contains("0 passed, 1 failed, 0 skipped"));
    }
}
