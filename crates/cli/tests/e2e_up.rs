//! `volhealth up` as a user meets it: a second run resumes without duplicating anything and keeps
//! health history, a second `up` on the same dir and a port already in use are refused at once,
//! and a broken `--dir` is a clear error, never a hang.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::bin;

/// Runs `volhealth ARGS`, failing the test if it has not finished within `limit`.
fn run_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("volhealth {} hung for {limit:?}", args.join(" "));
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A raw HTTP/1.0 request to the API server in `kubeconfig` with `token`; returns the status code.
fn request_as(
    kubeconfig: &std::path::Path,
    token: &str,
    method: &str,
    path: &str,
    body: &str,
) -> u16 {
    use std::io::{Read, Write};
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .unwrap()
        .trim()
        .to_string();
    let host = server
        .strip_prefix("http://")
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let mut s = std::net::TcpStream::connect(&host).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/merge-patch+json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    raw.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The token `up` gave an identity, from `<dir>/tokens.csv`.
fn token_of(dir: &std::path::Path, user: &str) -> String {
    let text = std::fs::read_to_string(dir.join("tokens.csv")).unwrap();
    text.lines()
        .find_map(|l| {
            let mut f = l.split(',');
            let token = f.next()?;
            (f.next()? == user).then(|| token.to_string())
        })
        .unwrap_or_else(|| panic!("no token for {user} in tokens.csv"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Names of the objects at a list path, read from the API server in the kubeconfig with a plain
/// HTTP/1.0 GET (the server answers requests without credentials as the admin).
fn names(kubeconfig: &std::path::Path, path: &str) -> Vec<String> {
    use std::io::{Read, Write};
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .unwrap()
        .trim()
        .to_string();
    let host = server
        .strip_prefix("http://")
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let mut s =
        std::net::TcpStream::connect(&host).unwrap_or_else(|e| panic!("connecting to {host}: {e}"));
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: application/json\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    let list: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("GET {path}: {e}:\n{raw}"));
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn second_up_resumes_without_duplicates_and_keeps_health_history() {
    let mut c = Cluster::start(1);
    let dir = c.dir.to_string_lossy().to_string();

    // While it runs, a second `up` on the same dir is refused at once.
    let second = run_within(
        &[
            "up",
            "--dir",
            &dir,
            "--nodes",
            "1",
            "--listen",
            "127.0.0.1:0",
        ],
        Duration::from_secs(30),
    );
    assert!(!second.status.success());
    assert!(
        stderr(&second).contains("already running"),
        "{}",
        stderr(&second)
    );

    let pvcs = names(&c.kubeconfig, "/api/v1/persistentvolumeclaims");
    let pods = names(&c.kubeconfig, "/api/v1/pods");
    let pvs = names(&c.kubeconfig, "/api/v1/persistentvolumes");
    assert_eq!(pvcs, ["data-1", "data-2"]);
    assert_eq!(pods, ["web-1", "web-2"]);
    assert_eq!(pvs, ["pv-data-1", "pv-data-2"]);

    // Each agent has its node's own identity, scoped like the kubelet's: its own pods and CSINode,
    // never PVC status. The monitor's identity may write PVC status.
    let node = token_of(&c.dir, "system:node:node-1");
    let patch = r#"{"status":{"phase":"Bound"}}"#;
    let pvc_status = "/api/v1/namespaces/default/persistentvolumeclaims/data-1/status";
    assert_eq!(
        request_as(&c.kubeconfig, &node, "PATCH", pvc_status, patch),
        403,
        "a node may not write PVC status"
    );
    assert_eq!(
        request_as(
            &c.kubeconfig,
            &node,
            "PATCH",
            "/api/v1/namespaces/default/pods/web-1/status",
            "{}"
        ),
        200
    );
    assert_eq!(
        request_as(
            &c.kubeconfig,
            &node,
            "PATCH",
            "/apis/storage.k8s.io/v1/csinodes/node-1/status",
            "{}"
        ),
        200
    );
    let monitor = token_of(
        &c.dir,
        "system:serviceaccount:kube-system:csi-external-health-monitor",
    );
    assert_eq!(
        request_as(&c.kubeconfig, &monitor, "PATCH", pvc_status, patch),
        200
    );
    for kc in ["nodes/node-1/kubeconfig", "monitor/kubeconfig"] {
        assert!(c.dir.join(kc).exists(), "{kc} is written for its component");
    }

    c.inject(&[
        "pvc",
        "default/data-1",
        "--side",
        "controller",
        "--status",
        "Degraded",
        "--reason",
        "SlowReplica",
    ]);
    let mut since = None;
    c.eventually("Degraded on data-1", || {
        let doc = c.status_json();
        since = doc["items"][0]["lastTransitionTime"]
            .as_str()
            .map(str::to_string);
        doc["items"][0]["status"] == "Degraded"
    });
    assert_eq!(c.interrupt(), Some(0));
    c.launch(1);

    assert_eq!(names(&c.kubeconfig, "/api/v1/persistentvolumeclaims"), pvcs);
    assert_eq!(names(&c.kubeconfig, "/api/v1/pods"), pods);
    assert_eq!(names(&c.kubeconfig, "/api/v1/persistentvolumes"), pvs);
    assert_eq!(names(&c.kubeconfig, "/api/v1/nodes"), ["node-1"]);
    let up_log = std::fs::read_to_string(c.up_log()).unwrap();
    assert!(up_log.contains("resuming the cluster"), "{up_log}");
    // The injected condition is still there, with its first lastTransitionTime.
    let doc = c.status_json();
    assert_eq!(doc["items"][0]["status"], "Degraded");
    assert_eq!(
        doc["items"][0]["lastTransitionTime"]
            .as_str()
            .map(str::to_string),
        since
    );
}

#[test]
fn a_port_in_use_is_a_clear_error_not_a_hang() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state").to_string_lossy().to_string();
    let listen = format!("127.0.0.1:{port}");
    let out = run_within(
        &["up", "--dir", &dir, "--listen", &listen],
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!("--listen {listen} is already in use")),
        "{err}"
    );
}

#[test]
fn a_broken_dir_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let out = run_within(
        &[
            "up",
            "--dir",
            &file.to_string_lossy(),
            "--listen",
            "127.0.0.1:0",
        ],
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not a directory"),
        "{}",
        stderr(&out)
    );

    let dir = tmp.path().join("garbled");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("up.json"), "{not json").unwrap();
    let out = run_within(
        &[
            "up",
            "--dir",
            &dir.to_string_lossy(),
            "--listen",
            "127.0.0.1:0",
        ],
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not a volhealth run record"),
        "{}",
        stderr(&out)
    );

    let out = run_within(
        &[
            "inject",
            "--dir",
            &tmp.path().to_string_lossy(),
            "pvc",
            "default/data-1",
            "--side",
            "node",
            "--status",
            "Degraded",
            "--reason",
            "X",
        ],
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("holds no `volhealth up` state"),
        "{}",
        stderr(&out)
    );
}
