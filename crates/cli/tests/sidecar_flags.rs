//! The long-running subcommands take the upstream sidecars' flags: `--v=N`, `--log-format
//! text|json`, `--metrics-address` and `--metrics-path`; logs carry no colour codes when stderr
//! is not a terminal.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use assert_cmd::Command;
use std::time::Duration;
use support::{free_port, http_get, wait_for};

fn volhealth() -> Command {
    Command::cargo_bin("volhealth").expect("the volhealth binary")
}

/// Runs `cmd` for at most `secs` seconds: whether it succeeded, and its standard error.
fn outcome(cmd: &mut Command, secs: u64) -> (bool, String) {
    let out = cmd
        .timeout(Duration::from_secs(secs))
        .output()
        .expect("run volhealth");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Asserts that a run (see [`outcome`]) failed with `want` in its standard error; returns that.
fn failed_saying((ok, stderr): (bool, String), want: &str) -> String {
    assert!(!ok, "succeeded: {stderr}");
    assert!(stderr.contains(want), "{want:?} not in: {stderr}");
    stderr
}

/// Runs `volhealth monitor ARGS`: whether it succeeded, and its standard error.
fn monitor(args: &[&str]) -> (bool, String) {
    outcome(volhealth().arg("monitor").args(args), 30)
}

/// Runs `volhealth ARGS`, asserts that it is refused as a usage error (exit code 2), and
/// returns its standard error.
fn usage_error(args: &[&str]) -> String {
    let out = volhealth().args(args).output().expect("run");
    assert_eq!(out.status.code(), Some(2), "volhealth {args:?}");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// An agent that logs one line (its endpoint) and then stops: its kubeconfig does not exist.
fn failing_agent(extra: &[&str]) -> (bool, String) {
    outcome(
        volhealth()
            .args([
                "agent",
                "--node-name",
                "node-a",
                "--kubeconfig",
                "/nonexistent/kubeconfig",
            ])
            .args(["--http-endpoint", "127.0.0.1:0"])
            .args(extra),
        60,
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
    // The Kubernetes components' JSON shape: ts, v and msg, key/values flat beside them.
    let serving = logs
        .iter()
        .find(|v| {
            v["msg"]
                .as_str()
                .is_some_and(|m| m.starts_with("serving /metrics"))
        })
        .unwrap_or_else(|| panic!("no JSON line for the endpoint in:\n{stderr}"));
    assert_eq!(serving["v"], 0, "an info line: {serving}");
    assert!(
        serving.get("level").is_none(),
        "info lines carry no level: {serving}"
    );
    assert!(
        serving["ts"].as_f64().is_some_and(|t| t > 1.7e9),
        "{serving}"
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn text_logs_to_a_pipe_carry_no_colour_codes() {
    let stderr = failed_saying(failing_agent(&[]), " INFO ");
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
    let err = usage_error(&["monitor", "--log-format", "xml"]);
    // The flag is --logging-format, as the Kubernetes components name it; --log-format is its
    // other spelling.
    assert!(err.contains("--logging-format"));
    for sub in ["monitor", "agent", "remediate", "scheduler-extender"] {
        volhealth()
            .args([sub, "-v=5", "--logging-format=json", "--help"])
            .assert()
            .success();
    }
}

#[test]
fn metrics_address_and_path_move_the_metrics_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut agent = support::volhealth(
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
    let err = usage_error(&[
        "monitor",
        "--http-endpoint",
        ":8080",
        "--metrics-address",
        ":8081",
    ]);
    assert!(
        err.contains("--metrics-address") && err.contains("--http-endpoint"),
        "{err}"
    );

    failed_saying(
        monitor(&["--v=3", "--metrics-path", "metrics"]),
        "invalid --metrics-path",
    );
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
        let (ok, stderr) = monitor(&[
            "--csi-address",
            "/nonexistent/csi.sock",
            "--leader-election",
            "--leader-election-lease-duration",
            timings[0],
            "--leader-election-renew-deadline",
            timings[1],
            "--leader-election-retry-period",
            timings[2],
        ]);
        assert!(!ok, "{timings:?} accepted");
        assert!(stderr.contains(named), "{timings:?}: {stderr}");
    }
}

#[test]
fn flags_as_go_parses_them_one_dash_bool_values_and_the_last_of_a_repeat() {
    // Parsed (the error is the missing kubeconfig's, not the command line's).
    let agent = outcome(
        Command::cargo_bin("volhealth-agent")
            .expect("the agent binary")
            .args([
                "-v=5",
                "-node-name=node-a",
                "-kubeconfig=/nonexistent/kubeconfig",
            ])
            .args(["-http-endpoint=127.0.0.1:0", "--logtostderr=true"]),
        60,
    );
    let stderr = failed_saying(agent, "/nonexistent/kubeconfig");
    assert!(!stderr.contains("unexpected argument"), "{stderr}");

    // --leader-election=false is off; the last --monitor-interval wins, as in Go.
    let last_wins = monitor(&[
        "-csi-address=/nonexistent/csi.sock",
        "--leader-election=false",
        "--monitor-interval=1m",
        "--monitor-interval=0s",
    ]);
    failed_saying(last_wins, "--monitor-interval must be positive");

    // A bool flag never takes the next word as its value.
    let (_, stderr) = monitor(&["--leader-election", "false"]);
    assert!(stderr.contains("unexpected argument 'false'"), "{stderr}");
}

#[test]
fn node_fault_flags_are_taken_in_either_spelling_and_checked() {
    // Accepted (Go's one-dash spelling too): the agent gets as far as its kubeconfig.
    let accepted = failing_agent(&[
        "-detect-node-faults=always",
        "-probe-timeout=2s",
        "--io-error-window",
        "1m30s",
    ]);
    failed_saying(accepted, "kubeconfig");
    // A mode that does not exist is a usage error naming the flag.
    let err = usage_error(&[
        "agent",
        "--node-name",
        "node-a",
        "--detect-node-faults=sometimes",
    ]);
    assert!(err.contains("--detect-node-faults"));
    // A zero timeout would call every mount unresponsive: refused.
    failed_saying(failing_agent(&["--probe-timeout=0s"]), "--probe-timeout");
}
