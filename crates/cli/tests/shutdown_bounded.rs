//! SIGTERM ends every daemon promptly whatever it is waiting on: each runs against a CSI socket
//! that accepts and never answers and an API server address that accepts and never answers,
//! and must exit after SIGTERM, saying what it was cut off from when it had to be.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::bin;

/// Generous: the point is that the daemon does not hang, not how fast it is.
const EXIT_LIMIT: Duration = Duration::from_secs(10);

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

/// Starts `volhealth ARGS`, sends SIGTERM after it had time to get stuck, and returns its
/// stderr once it exited; fails if it has not within [`EXIT_LIMIT`].
fn terminate(args: &[String]) -> String {
    let mut child = Command::new(bin())
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        child.try_wait().unwrap().is_none(),
        "volhealth {} exited before SIGTERM",
        args.join(" ")
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + EXIT_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "volhealth {} still running {EXIT_LIMIT:?} after SIGTERM:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        status.success() || status.code() == Some(143) || status.signal() == Some(15),
        "volhealth {} exited with {status}:\n{stderr}",
        args.join(" ")
    );
    stderr
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_monitor_stuck_on_a_hung_driver_and_api_server_exits_and_says_on_what() {
    let h = Hung::start();
    let err = terminate(&s(&[
        "monitor",
        "--csi-address",
        &h.csi(),
        "--kubeconfig",
        &h.kubeconfig(),
        "--http-endpoint",
        "127.0.0.1:0",
    ]));
    assert!(err.contains("cut off while waiting for"), "{err}");
}

#[test]
fn every_other_daemon_stuck_on_a_hung_api_server_exits_after_sigterm() {
    let h = Hung::start();
    let kc = h.kubeconfig();
    let root = h.tmp.path().join("kubelet");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.display().to_string();
    let policy = h.tmp.path().join("policy.yaml");
    std::fs::write(&policy, "rules: []\n").unwrap();
    let policy = policy.display().to_string();
    let daemons = [
        s(&[
            "agent",
            "--node-name",
            "n1",
            "--kubeconfig",
            &kc,
            "--kubelet-root-dir",
            &root,
        ]),
        s(&[
            "scheduler-extender",
            "--kubeconfig",
            &kc,
            "--listen",
            "127.0.0.1:0",
        ]),
        s(&[
            "remediate",
            "--kubeconfig",
            &kc,
            "--policy",
            &policy,
            "--http-endpoint",
            "127.0.0.1:0",
        ]),
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
    ];
    for args in daemons {
        let err = terminate(&args);
        // Cut off or not, a cut-off names what it was waiting for.
        if let Some((_, what)) = err.split_once("cut off while waiting for: ") {
            assert!(!what.trim().is_empty(), "{err}");
        }
    }
    let _ = h.port;
}
