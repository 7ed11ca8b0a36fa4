//! SIGTERM ends every daemon promptly whatever it is waiting on, and the daemon names it: the
//! clients run against a CSI socket and an API server address that accept and never answer,
//! the API server is left with a half-sent request, the driver with a call it delays for ten
//! minutes. Each is sent SIGTERM once it logged that it waits for the thing, and must exit
//! within the bound, naming that thing at the signal and, when it had to be cut off, then too.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{bin, wait_for};

/// Generous: the point is that the daemon does not hang, not how fast it is.
const EXIT_LIMIT: Duration = Duration::from_secs(10);

/// How long a daemon gets to start and reach what it then waits on.
const START_LIMIT: Duration = Duration::from_secs(60);

/// What the monitor, given a driver that never answers, is waiting for.
const MONITOR_WAITS_FOR: &str = "probing the driver's capabilities";

/// A unix socket and a TCP port that accept connections and never say anything.
struct Hung {
    tmp: tempfile::TempDir,
    socket: std::path::PathBuf,
    port: u16,
}

impl Hung {
    fn start() -> Hung {
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("hung.sock");
        let unix = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        // Accepted connections are kept open and never read or written.
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for c in unix.incoming() {
                held.push(c);
            }
        });
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for c in tcp.incoming() {
                held.push(c);
            }
        });
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
        );
        std::fs::write(tmp.path().join("kubeconfig"), kubeconfig).unwrap();
        Hung { tmp, socket, port }
    }

    fn kubeconfig(&self) -> String {
        self.tmp.path().join("kubeconfig").display().to_string()
    }

    fn csi(&self) -> String {
        format!("unix://{}", self.socket.display())
    }
}

/// A daemon started with its stderr collected as it is written.
struct Daemon {
    child: std::process::Child,
    args: Vec<String>,
    stderr: Arc<Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Daemon {
    /// Starts `volhealth ARGS` logging at info, and at trace what it starts waiting for.
    fn start(args: &[String]) -> Daemon {
        let mut child = Command::new(bin())
            .args(args)
            .env("RUST_LOG", "info,volhealth_daemon::in_progress=trace")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().unwrap();
        let collected = stderr.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut all = collected.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        Daemon {
            child,
            args: args.to_vec(),
            stderr,
            reader,
        }
    }

    fn name(&self) -> String {
        self.args.join(" ")
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until the daemon logged that it is waiting for `what` (a `waiting for: WHAT` line).
    fn wait_until_waiting_for(&mut self, what: &str) {
        let needle = format!("waiting for: {what}");
        wait_for(
            START_LIMIT,
            &format!("{} to wait for {what}", self.name()),
            || {
                if self.stderr().contains(&needle) {
                    return Some(());
                }
                if let Some(status) = self.child.try_wait().unwrap() {
                    panic!(
                        "volhealth {} exited ({status}) before waiting for {what}:\n{}",
                        self.name(),
                        self.stderr()
                    );
                }
                None
            },
        );
    }

    /// Sends SIGTERM and returns the daemon's stderr once it exited; fails if it has not
    /// within [`EXIT_LIMIT`].
    fn terminate(mut self) -> String {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + EXIT_LIMIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "volhealth {} still running {EXIT_LIMIT:?} after SIGTERM:\n{}",
                    self.name(),
                    self.stderr()
                );
            }
            std::thread::park_timeout(Duration::from_millis(50));
        };
        // The pipe closed with the process: everything it wrote is read.
        let name = self.name();
        self.reader.join().unwrap();
        let stderr = self.stderr.lock().unwrap().clone();
        assert!(
            status.success() || status.code() == Some(143) || status.signal() == Some(15),
            "volhealth {name} exited with {status}:\n{stderr}"
        );
        stderr
    }
}

/// What the line that starts with `prefix` goes on to say, if the log has such a line.
fn said_after<'a>(log: &'a str, prefix: &str) -> Option<&'a str> {
    log.lines()
        .find_map(|l| l.split_once(prefix).map(|(_, rest)| rest))
}

/// The daemon said, at SIGTERM, that it was waiting for `what`, and if it was cut off, that
/// it was cut off from `what`.
fn assert_named(log: &str, what: &str) {
    let at_signal = said_after(log, "shutting down; waiting for: ")
        .unwrap_or_else(|| panic!("no shutdown line:\n{log}"));
    assert!(
        at_signal.contains(what),
        "not named at SIGTERM: {what}\n{log}"
    );
    if let Some(cut_off) = said_after(log, "cut off while waiting for: ") {
        assert!(
            cut_off.contains(what),
            "not named when cut off: {what}\n{log}"
        );
    }
}

/// Starts `volhealth ARGS`, waits until it is waiting for `what`, sends SIGTERM and checks it
/// exited within [`EXIT_LIMIT`] naming `what`; returns its stderr.
fn terminate_while_waiting_for(args: &[String], what: &str) -> String {
    let mut daemon = Daemon::start(args);
    daemon.wait_until_waiting_for(what);
    let log = daemon.terminate();
    assert_named(&log, what);
    log
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_monitor_stuck_on_a_hung_driver_and_api_server_exits_and_says_on_what() {
    let h = Hung::start();
    let err = terminate_while_waiting_for(
        &s(&[
            "monitor",
            "--csi-address",
            &h.csi(),
            "--kubeconfig",
            &h.kubeconfig(),
            "--http-endpoint",
            "127.0.0.1:0",
        ]),
        MONITOR_WAITS_FOR,
    );
    assert!(err.contains("cut off while waiting for"), "{err}");
}

#[test]
fn every_other_daemon_stuck_on_a_hung_api_server_exits_and_says_on_what() {
    let h = Hung::start();
    let kc = h.kubeconfig();
    let root = h.tmp.path().join("kubelet");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.display().to_string();
    let policy = h.tmp.path().join("policy.yaml");
    std::fs::write(&policy, "rules: []\n").unwrap();
    let policy = policy.display().to_string();
    let api = |path: &str| {
        format!(
            "the API server request GET https://127.0.0.1:{}{path}",
            h.port
        )
    };
    let daemons = [
        (
            s(&[
                "agent",
                "--node-name",
                "n1",
                "--kubeconfig",
                &kc,
                "--kubelet-root-dir",
                &root,
                "--http-endpoint",
                "127.0.0.1:0",
            ]),
            api("/api/v1/nodes/n1"),
        ),
        (
            s(&[
                "scheduler-extender",
                "--kubeconfig",
                &kc,
                "--listen",
                "127.0.0.1:0",
            ]),
            api("/apis/storage.k8s.io/v1/csidrivers"),
        ),
        (
            s(&[
                "remediate",
                "--kubeconfig",
                &kc,
                "--policy",
                &policy,
                "--http-endpoint",
                "127.0.0.1:0",
            ]),
            api("/api/v1/pods"),
        ),
        (
            s(&[
                "cluster-controllers",
                "--kubeconfig",
                &kc,
                "--driver",
                "d",
                "--controller-endpoint",
                &h.csi(),
                "--node",
                &format!("n1={}", h.csi()),
                "--kubelet-root",
                &format!("n1={root}"),
            ]),
            api("/apis/storage.k8s.io/v1/storageclasses"),
        ),
    ];
    for (args, what) in daemons {
        terminate_while_waiting_for(&args, &what);
    }
}

#[test]
fn the_api_server_answering_a_half_sent_request_exits_and_says_on_what() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data").display().to_string();
    let mut daemon = Daemon::start(&s(&[
        "apiserver",
        "--insecure-http",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data,
        // The anonymous create must reach its body: under the default Node,RBAC it is refused
        // before the server waits for it.
        "--authorization-mode",
        "Node,AlwaysAllow",
    ]));
    let addr = wait_for(START_LIMIT, "the API server to listen", || {
        let log = daemon.stderr();
        let url = said_after(&log, "listening on http://")?;
        Some(url.trim().to_string())
    });
    // A create whose body never arrives in full: the server waits for the rest.
    let mut client = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        client,
        "POST /api/v1/namespaces/default/persistentvolumeclaims HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"kind\":"
    )
    .unwrap();
    let what = "the request POST /api/v1/namespaces/default/persistentvolumeclaims";
    daemon.wait_until_waiting_for(what);
    let log = daemon.terminate();
    assert_named(&log, what);
    assert!(log.contains("cut off while waiting for"), "{log}");
    drop(client);
}

#[test]
fn the_driver_answering_a_delayed_call_exits_and_says_on_what() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let endpoint = format!("unix://{}", tmp.path().join("csi.sock").display());
    let mut daemon = Daemon::start(&s(&[
        "driver",
        "--endpoint",
        &endpoint,
        "--state-dir",
        &state.display().to_string(),
        "--node-id",
        "n1",
        "--no-mounts",
    ]));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let channel = rt
        .block_on(volhealth_csi::client::connect(&endpoint, START_LIMIT))
        .unwrap();
    support::output_ok(
        Command::new(bin())
            .args(["inject", "--state-dir"])
            .arg(&state)
            .args(["rpc", "Probe", "--code", "OK", "--delay", "10m"]),
    );
    // Answered ten minutes from now: the call is open when SIGTERM comes.
    let call = rt.spawn(async move {
        volhealth_csi::v1::identity_client::IdentityClient::new(channel)
            .probe(volhealth_csi::v1::ProbeRequest {})
            .await
    });
    let what = "the CSI call /csi.v1.Identity/Probe";
    daemon.wait_until_waiting_for(what);
    let log = daemon.terminate();
    assert_named(&log, what);
    assert!(log.contains("cut off while waiting for"), "{log}");
    let answer = rt.block_on(call).unwrap();
    assert!(answer.is_err(), "the delayed call was answered: {answer:?}");
}
