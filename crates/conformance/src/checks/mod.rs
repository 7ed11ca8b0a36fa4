//! The checks, in the order they run. Each is a named [`Case`] with its spec reference.

mod controller;
mod entries;
mod inject;
mod node;
mod paging;
mod secrets;

use std::future::Future;
use std::io::Write;
use std::time::Instant;

use tonic::{Code, Status};

use crate::inject::Injector;
use crate::report::{Case, CaseResult, Outcome, format_duration};
use crate::session::Session;

/// A listing with more pages than this (at max_entries=0) is taken as one that never ends.
const MAX_PAGES: usize = 1000;

/// Every case of the suite, in run order.
pub fn all_cases() -> Vec<Case> {
    let mut v = Vec::new();
    v.extend_from_slice(controller::CASES);
    v.extend_from_slice(paging::CASES);
    v.extend_from_slice(node::CASES);
    v.extend_from_slice(secrets::CASES);
    v.extend_from_slice(inject::CASES);
    v.extend_from_slice(entries::CASES);
    v
}

/// Runs the cases one by one, printing progress and appending to `results`.
pub struct Runner<'a> {
    /// The session.
    pub s: &'a Session,
    /// The injector, when `--inject-cmd` was given.
    pub injector: Option<&'a Injector>,
    /// Where progress lines go.
    pub progress: &'a mut (dyn Write + Send),
    /// Results so far (shared with the caller so an interrupted run keeps them).
    pub results: &'a std::sync::Mutex<Vec<CaseResult>>,
    /// Number of cases, for `[ n/total]`.
    pub total: usize,
}

impl Runner<'_> {
    /// Runs one case, printing and recording its result.
    pub async fn case<F>(&mut self, case: Case, check: F)
    where
        F: Future<Output = (Outcome, Vec<String>)>,
    {
        let started = Instant::now();
        let (outcome, notes) = check.await;
        let duration = started.elapsed();
        let n = self.results.lock().map(|r| r.len() + 1).unwrap_or(0);
        let reason = match outcome.reason() {
            "" => String::new(),
            r => format!(": {r}"),
        };
        // A skipped case ran nothing, so it has no time worth showing.
        let took = match outcome {
            Outcome::Skip(_) => String::new(),
            _ => format!(" ({})", format_duration(duration)),
        };
        let _ = writeln!(
            self.progress,
            "[{n:>2}/{}] {} {}{took}{reason}",
            self.total,
            outcome.label(),
            case.name,
        );
        if let Ok(mut r) = self.results.lock() {
            r.push(CaseResult {
                case,
                outcome,
                duration,
                notes,
            });
        }
    }
}

/// Runs every case.
pub async fn run_all(r: &mut Runner<'_>) {
    controller::run(r).await;
    paging::run(r).await;
    node::run(r).await;
    secrets::run(r).await;
    inject::run(r).await;
    entries::run(r).await;
}

/// A result without notes.
fn plain(o: Outcome) -> (Outcome, Vec<String>) {
    (o, Vec::new())
}

/// A failure from a list of problems (pass when empty); at most five are spelled out.
fn from_problems(rule: &str, problems: Vec<String>) -> Outcome {
    if problems.is_empty() {
        return Outcome::Pass;
    }
    let shown: Vec<&str> = problems.iter().take(5).map(String::as_str).collect();
    let more = match problems.len() {
        n if n > 5 => format!(" (and {} more)", n - 5),
        _ => String::new(),
    };
    Outcome::Fail(format!("{rule}: {}{more}", shown.join("; ")))
}

/// `CODE: message` of a driver's error, with every secret value hidden.
fn describe(s: &Session, status: &Status) -> String {
    redact(s, &format!("{:?}: {}", status.code(), status.message()))
}

/// Hides the session's secret values in `text`.
fn redact(s: &Session, text: &str) -> String {
    let mut out = text.to_string();
    for v in s.secrets.values().filter(|v| !v.is_empty()) {
        out = out.replace(v.as_str(), "<redacted>");
    }
    out
}

/// Checks that a call failed with `want`; `rule` names the rule in the failure.
fn expect_code<T>(s: &Session, result: Result<T, Status>, want: Code, rule: &str) -> Outcome {
    match result {
        Ok(_) => Outcome::Fail(format!("{rule}: the call succeeded, want {want:?}")),
        Err(e) if e.code() == want => Outcome::Pass,
        Err(e) => Outcome::Fail(format!("{rule}: got {}, want {want:?}", describe(s, &e))),
    }
}

/// A volume id no driver has: random, so it cannot clash.
fn unknown_volume_id(s: &Session) -> String {
    format!(
        "volhealth-conformance-{}-no-such-volume",
        s.fixture.run_id()
    )
}
