//! Child processes for the end-to-end tests: each writes its output to a log of its own, is
//! killed (and reaped) when dropped, and shows the end of its log when a test fails. Also the
//! probe for outside tools, which skips a test with a printed reason (or fails it under
//! `VOLHEALTH_REQUIRE_TOOLS=1`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Lines of a process's log that a failing test prints.
const LOG_TAIL_LINES: usize = 60;

/// A child process that is killed (and reaped) when dropped, so a failing test leaves nothing behind.
pub struct Proc {
    /// What this process is, for failure messages.
    pub name: String,
    /// The running child.
    pub child: Child,
    /// Where its output goes.
    pub log: PathBuf,
}

impl Proc {
    /// Starts `program ARGS...` with stdout and stderr appended to `<log_dir>/<name>.log`, with
    /// extra environment variables `env`, in the working directory `cwd` when one is given.
    pub fn start(
        program: &Path,
        name: &str,
        log_dir: &Path,
        cwd: Option<&Path>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        std::fs::create_dir_all(log_dir).expect("create log dir");
        let log_path = log_dir.join(format!("{name}.log"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("open log");
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log"))
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc {
            name: name.to_string(),
            child,
            log: log_path,
        }
    }

    /// Sends SIGKILL and waits for the process to end.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// What the process has written so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
        // A test that fails mid-way removes its directory with the logs in it; print what each
        // process said last, so a failure on a CI machine can be read without rerunning it.
        if std::thread::panicking() {
            let text = self.log_text();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
            eprintln!(
                "--- last {} lines of {} ({}) ---\n{}\n--- end of {} ---",
                tail.len(),
                self.name,
                self.log.display(),
                tail.join("\n"),
                self.name
            );
        }
    }
}

/// Whether an outside tool is present. When it is missing the test should return early after
/// this prints why; under `VOLHEALTH_REQUIRE_TOOLS=1` a missing tool fails the test instead.
pub fn have_tool(tool: &str, probe: &[&str]) -> bool {
    let ok = Command::new(tool)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("VOLHEALTH_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!(
                "{tool} is required (VOLHEALTH_REQUIRE_TOOLS=1) but `{tool} {}` failed",
                probe.join(" ")
            );
        }
        eprintln!(
            "SKIPPED: {tool} is not available (`{tool} {}` failed)",
            probe.join(" ")
        );
    }
    ok
}

/// The Python interpreter of the tests that drive a client nobody here wrote: `VOLHEALTH_PYTHON`,
/// or `python3`.
pub fn python() -> String {
    std::env::var("VOLHEALTH_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs the workspace's `tests/python/<script>` with `args` under [`python`] when that has
/// `grpcio`, and fails unless the script exits 0 having printed a line `OK`. False, after printing
/// why, when python has no `grpcio` (a failure instead under `VOLHEALTH_REQUIRE_TOOLS=1`, see
/// [`have_tool`]).
pub async fn run_grpcio_script(script: &str, args: &[&Path]) -> bool {
    let python = python();
    if !have_tool(&python, &["-c", "import grpc"]) {
        return false;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/python")
        .join(script);
    let out = tokio::process::Command::new(&python)
        .arg(&path)
        .args(args)
        .output()
        .await
        .expect("run python");
    assert_printed_ok(script, &out);
    true
}

/// The version test of [`python_with_kubernetes_client`]: PyPI `kubernetes` 37 or later, the
/// first with the KEP-1432 models.
const KUBERNETES_CLIENT_PROBE: &str =
    "import sys, kubernetes; sys.exit(0 if int(kubernetes.__version__.split('.')[0]) >= 37 else 1)";

/// [`python`] when it has the Python `kubernetes` client, 37 or later; None when not, after
/// printing why (a failure instead under `VOLHEALTH_REQUIRE_TOOLS=1`, see [`have_tool`]).
pub fn python_with_kubernetes_client() -> Option<String> {
    let python = python();
    have_tool(&python, &["-c", KUBERNETES_CLIENT_PROBE]).then_some(python)
}

/// Runs `python ARGS...`, which must exit 0 having printed a line `OK`; `what` names the run in
/// a failure.
pub fn run_python_ok(python: &str, args: &[&std::ffi::OsStr], what: &str) {
    let out = Command::new(python)
        .args(args)
        .output()
        .expect("run python");
    assert_printed_ok(what, &out);
}

/// Fails unless `out` is of a run that exited 0 having printed a line `OK`.
fn assert_printed_ok(what: &str, out: &std::process::Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "OK"),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr),
    );
}

/// What `promtool check metrics` said about a page it refused.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PromtoolComplaints(pub String);

/// Runs `promtool check metrics` on a metrics page: `Err` holds promtool's complaints.
/// Callers check [`have_tool`]`("promtool", &["--version"])` first.
pub fn promtool_check_metrics(page: &str) -> Result<(), PromtoolComplaints> {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    child
        .stdin
        .take()
        .expect("promtool stdin")
        .write_all(page.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool output");
    if out.status.success() {
        Ok(())
    } else {
        Err(PromtoolComplaints(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    free_addr().port()
}

/// A loopback address no one listens on now.
pub fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}
