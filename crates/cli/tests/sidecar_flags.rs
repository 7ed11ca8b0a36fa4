//! The long-running subcommands take the upstream sidecars' flags: `--v=N`, `--log-format
//! text|json`, `--metrics-address` and `--metrics-path`; logs carry no colour codes when stderr
//! is not a terminal.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use assert_cmd::Command;
use std::time::Duration;
use support::{Proc, free_port, http_get, wait_for};

fn volhealth() -> Command {
    Command::cargo_bin("volhealth").expect("the volhealth binary")
}

/// An agent that logs one line (its endpoint) and then stops: its kubeconfig does not exist.
fn failing_agent(extra: &[&str]) -> (bool, String) {
    let out = volhealth()
        .args([
            "agent",
            "--node-name",
            "node-a",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .args(["--http-endpoint", "127.0.0.1:0"])
        .args(extra)
        .timeout(Duration::from_secs(60))
        .output()
        .expect("run the agent");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn json_logs_are_one_object_per_line_and_never_coloured() {
    let (ok, stderr) = failing_agent(&["--v=5", "--log-format", "json"]);
    assert!(!ok, "{stderr}");
    let logs: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let serving = logs
        .iter()
        .find(|v| {
            v["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("serving /metrics"))
        })
        .unwrap_or_else(|| panic!("no JSON line for the endpoint in:\n{stderr}"));
    assert_eq!(serving["level"], "INFO", "{serving}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn text_logs_to_a_pipe_carry_no_colour_codes() {
    let (ok, stderr) = failing_agent(&[]);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains(" INFO "), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn verbosity_and_format_are_accepted_by_every_daemon() {
    for sub in ["apiserver", "driver", "monitor", "agent"] {
        volhealth()
            .args([sub, "--v=5", "--log-format", "json", "--help"])
            .assert()
            .success();
    }
    // A bad value is a usage error naming the flag.
    let out = volhealth()
        .args(["monitor", "--log-format", "xml"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--log-format"));
}

#[test]
fn metrics_address_and_path_move_the_metrics_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut agent = Proc::start(
        "agent",
        dir.path(),
        &[
            "agent",
            "--node-name",
            "node-a",
            "--feature-gates",
            "CSIVolumeHealth=false",
            "--metrics-address",
            &addr,
            "--metrics-path",
            "/custom/metrics",
        ],
    );
    let (status, content_type, page) =
        wait_for(Duration::from_secs(30), "the agent's metrics", || {
            assert!(
                agent.is_running(),
                "the agent exited; see {}",
                dir.path().display()
            );
            http_get(&format!("http://{addr}/custom/metrics"), None)
        });
    assert_eq!(status, 200, "{page}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    // With the gate off the agent never runs a cycle: this is the page before the first one,
    // complete and valid though it has no series of its own yet.
    assert!(
        page.contains("volhealth_build_info{component=\"agent\""),
        "{page}"
    );
    if support::have_tool("promtool", &["--version"])
        && let Err(problems) = support::promtool_check_metrics(&page)
    {
        panic!("promtool check metrics before the first cycle:\n{problems}\n{page}");
    }
    let (status, _, _) = http_get(&format!("http://{addr}/metrics"), None).expect("GET /metrics");
    assert_eq!(status, 404);
    let (status, _, _) = http_get(&format!("http://{addr}/healthz"), None).expect("GET /healthz");
    assert_eq!(status, 200);
    agent.kill();
}

#[test]
fn metrics_address_and_http_endpoint_exclude_each_other() {
    let out = volhealth()
        .args([
            "monitor",
            "--http-endpoint",
            ":8080",
            "--metrics-address",
            ":8081",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--metrics-address") && err.contains("--http-endpoint"),
        "{err}"
    );

    let out = volhealth()
        .args(["monitor", "--v=3", "--metrics-path", "metrics"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid --metrics-path"));
}

#[test]
fn leader_election_timings_client_go_refuses_are_refused_naming_the_flag() {
    for (timings, named) in [
        (["5s", "3s", "4s"], "--leader-election-renew-deadline (3s)"),
        (
            ["0s", "10s", "2s"],
            "--leader-election-lease-duration must be at least 1s",
        ),
        (
            ["10s", "10s", "2s"],
            "--leader-election-lease-duration (10s) must be greater",
        ),
    ] {
        let out = volhealth()
            .args(["monitor", "--csi-address", "/nonexistent/csi.sock"])
            .args(["--leader-election", "--leader-election-lease-duration"])
            .arg(timings[0])
            .arg("--leader-election-renew-deadline")
            .arg(timings[1])
            .arg("--leader-election-retry-period")
            .arg(timings[2])
            .timeout(Duration::from_secs(30))
            .output()
            .expect("run the monitor");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{timings:?} accepted");
        assert!(stderr.contains(named), "{timings:?}: {stderr}");
    }
}
