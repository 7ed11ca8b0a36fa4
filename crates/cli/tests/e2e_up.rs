//! `volhealth up` as a user meets it: a second run resumes without duplicating anything and keeps
//! health history, a second `up` on the same dir and a port already in use are refused at once,
//! and a broken `--dir` is a clear error, never a hang; `--pvcs-per-node` sizes the sample
//! workload, and every sample is watched by both writers.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::bin;

/// Runs `volhealth ARGS`, failing the test unless it fails within 30 seconds; returns its
/// standard error.
fn fails_at_once(args: &[&str]) -> String {
    let limit = Duration::from_secs(30);
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
    let out = child.wait_with_output().unwrap();
    assert!(
        !out.status.success(),
        "volhealth {} succeeded",
        args.join(" ")
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A request to the API server as the identity of `kubeconfig` (a component's own: its client
/// certificate or token, over TLS); returns the status code.
fn request_as(kubeconfig: &std::path::Path, method: &str, path: &str, body: &str) -> u16 {
    support::kube_request(kubeconfig, method, path, None, body)
        .unwrap_or_else(|| panic!("{method} {path} with {} failed", kubeconfig.display()))
        .0
}

/// Names of the objects at a list path, read from the API server as the admin of `kubeconfig`.
fn names(kubeconfig: &std::path::Path, path: &str) -> Vec<String> {
    let (status, _, body) =
        support::kube_request(kubeconfig, "GET", path, Some("application/json"), "")
            .unwrap_or_else(|| panic!("GET {path} failed"));
    assert_eq!(status, 200, "GET {path}: {body}");
    let list: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}:\n{body}"));
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
    let err = fails_at_once(&[
        "up",
        "--dir",
        &dir,
        "--nodes",
        "1",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(err.contains("already running"), "{err}");

    let pvcs = names(&c.kubeconfig, "/api/v1/persistentvolumeclaims");
    let pods = names(&c.kubeconfig, "/api/v1/pods");
    let pvs = names(&c.kubeconfig, "/api/v1/persistentvolumes");
    assert_eq!(pvcs, ["data-1", "data-2"]);
    assert_eq!(pods, ["web-1", "web-2"]);
    assert_eq!(pvs, ["pv-data-1", "pv-data-2"]);

    // `status --as`: the admin may act as a node, which may not list every claim.
    let kc = c.kubeconfig.to_string_lossy().to_string();
    let (ok, _, err) = c.volhealth(&["status", "-A", "--kubeconfig", &kc]);
    assert!(ok, "{err}");
    let (ok, _, err) = c.volhealth(&[
        "status",
        "-A",
        "--kubeconfig",
        &kc,
        "--as",
        "system:node:node-1",
        "--as-group",
        "system:nodes",
    ]);
    assert!(!ok, "a node listed every claim");
    assert!(err.contains("403 Forbidden"), "{err}");

    // Each agent has its node's own identity (a client certificate), scoped like the kubelet's:
    // its own pods and CSINode, never PVC status. The monitor's identity (its service account's
    // token) may write PVC status. Nobody is an administrator without credentials.
    let node = c.dir.join("nodes/node-1/kubeconfig");
    let patch = r#"{"status":{"phase":"Bound"}}"#;
    let pvc_status = "/api/v1/namespaces/default/persistentvolumeclaims/data-1/status";
    assert_eq!(
        request_as(&node, "PATCH", pvc_status, patch),
        403,
        "a node may not write PVC status"
    );
    assert_eq!(
        request_as(
            &node,
            "PATCH",
            "/api/v1/namespaces/default/pods/web-1/status",
            "{}"
        ),
        200
    );
    assert_eq!(
        request_as(
            &node,
            "PATCH",
            "/apis/storage.k8s.io/v1/csinodes/node-1/status",
            "{}"
        ),
        200
    );
    let monitor = c.dir.join("monitor/kubeconfig");
    assert_eq!(request_as(&monitor, "PATCH", pvc_status, patch), 200);
    // The monitor has what deploy/kubernetes grants it and nothing more (RBAC is on).
    assert_eq!(
        request_as(&monitor, "GET", "/api/v1/namespaces/default/pods", ""),
        403,
        "the monitor's service account may not read pods"
    );
    assert_eq!(
        request_as(
            &monitor,
            "PATCH",
            "/api/v1/namespaces/default/pods/web-1/status",
            "{}"
        ),
        403,
        "nor write pod status"
    );
    let node_kc = std::fs::read_to_string(&node).unwrap();
    assert!(
        node_kc.contains("client-certificate-data") && !node_kc.contains("token"),
        "the node presents its certificate:\n{node_kc}"
    );
    let anonymous = c.dir.join("anonymous-kubeconfig");
    let admin = std::fs::read_to_string(&c.kubeconfig).unwrap();
    let without_user = admin.split("users:").next().unwrap();
    std::fs::write(
        &anonymous,
        format!("{without_user}users:\n- name: volhealth\n  user: {{}}\n"),
    )
    .unwrap();
    assert_eq!(
        request_as(&anonymous, "GET", "/api/v1/persistentvolumeclaims", ""),
        401,
        "requests without credentials are refused"
    );

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
fn pvcs_per_node_sizes_the_workload_and_both_writers_watch_every_sample() {
    let c = Cluster::start_with(2, &["--pvcs-per-node", "3"]);
    let want = |prefix: &str| -> Vec<String> {
        let mut v: Vec<String> = (1..=6).map(|n| format!("{prefix}{n}")).collect();
        v.sort();
        v
    };
    assert_eq!(
        names(&c.kubeconfig, "/api/v1/persistentvolumeclaims"),
        want("data-")
    );
    assert_eq!(names(&c.kubeconfig, "/api/v1/pods"), want("web-"));
    assert_eq!(
        names(&c.kubeconfig, "/api/v1/persistentvolumes"),
        want("pv-data-")
    );
    // Round-robin: web-1, web-3, web-5 on node-1; web-2, web-4, web-6 on node-2.
    for n in 1..=6 {
        let pod = c
            .get_json(&format!("/api/v1/namespaces/default/pods/web-{n}"))
            .unwrap();
        let node = if n % 2 == 1 { "node-1" } else { "node-2" };
        assert_eq!(pod["spec"]["nodeName"], node, "web-{n}");
        let claim = c
            .get_json(&format!(
                "/api/v1/namespaces/default/persistentvolumeclaims/data-{n}"
            ))
            .unwrap();
        assert_eq!(claim["status"]["phase"], "Bound", "data-{n}");
    }
    // The last samples of each node are watched like the first.
    c.inject_pvc("default/data-6", "controller", "Inaccessible", "Gone", &[]);
    c.inject_pvc("default/data-5", "node", "Degraded", "SlowIo", &[]);
    c.eventually("data-6 Inaccessible and web-5 Degraded", || {
        c.status_of("PersistentVolumeClaim", "data-6", "controller") == ["Inaccessible"]
            && c.status_of("Pod", "web-5", "node") == ["Degraded"]
    });
}

#[test]
fn with_a_legacy_driver_the_tour_runs_through_the_bridge() {
    let c = Cluster::start_with(1, &["--legacy-driver", "--pvcs-per-node", "1"]);
    c.inject_pvc(
        "default/data-1",
        "controller",
        "Inaccessible",
        "Gone",
        &["--message", "the array lost the volume"],
    );
    c.inject_pvc("default/data-1", "node", "Inaccessible", "PathGone", &[]);
    // The legacy shape carries no status or reason: the bridge's default mapping shows.
    c.eventually("data-1 and web-1 Degraded through the bridge", || {
        c.status_of("PersistentVolumeClaim", "data-1", "controller") == ["Degraded"]
            && c.status_of("Pod", "web-1", "node") == ["Degraded"]
    });
    let claim = c
        .get_json("/api/v1/namespaces/default/persistentvolumeclaims/data-1")
        .unwrap();
    let condition = &claim["status"]["healthStatus"]["healthConditions"][0];
    assert_eq!(condition["reason"], "VolumeConditionAbnormal", "{claim}");
    assert!(
        condition["message"] == "the array lost the volume",
        "{claim}"
    );
    c.inject(&["clear", "pvc", "default/data-1"]);
    c.eventually("both cleared", || {
        c.status_of("PersistentVolumeClaim", "data-1", "controller")
            .is_empty()
            && c.status_of("Pod", "web-1", "node").is_empty()
    });
}

#[test]
fn a_port_in_use_is_a_clear_error_not_a_hang() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state").to_string_lossy().to_string();
    let listen = format!("127.0.0.1:{port}");
    let err = fails_at_once(&["up", "--dir", &dir, "--listen", &listen]);
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
    let file = file.to_string_lossy();
    let err = fails_at_once(&["up", "--dir", &file, "--listen", "127.0.0.1:0"]);
    assert!(err.contains("is not a directory"), "{err}");

    let dir = tmp.path().join("garbled");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("up.json"), "{not json").unwrap();
    let dir = dir.to_string_lossy();
    let err = fails_at_once(&["up", "--dir", &dir, "--listen", "127.0.0.1:0"]);
    assert!(err.contains("is not a volhealth run record"), "{err}");

    let err = fails_at_once(&[
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
    ]);
    assert!(err.contains("holds no `volhealth up` state"), "{err}");
}
