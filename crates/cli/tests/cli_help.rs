//! The binary's entry points: help, version, and a clear failure for a wrong command.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use assert_cmd::Command;

fn volhealth() -> Command {
    Command::new(env!("CARGO_BIN_EXE_volhealth"))
}

#[test]
fn help_lists_every_subcommand() {
    let out = volhealth()
        .arg("--help")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    for sub in [
        "apiserver",
        "driver",
        "inject",
        "monitor",
        "agent",
        "up",
        "status",
        "conformance",
    ] {
        assert!(text.contains(sub), "--help does not mention {sub}:\n{text}");
        volhealth().args([sub, "--help"]).assert().success();
    }
}

#[test]
fn version_names_the_binary_and_crate_version() {
    let out = volhealth()
        .arg("--version")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(
        String::from_utf8_lossy(&out).trim(),
        format!("volhealth {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn unknown_subcommand_fails_with_usage() {
    let out = volhealth()
        .arg("frobnicate")
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&out).contains("Usage"));
}

#[test]
fn monitor_flags_follow_the_upstream_sidecar() {
    let out = volhealth()
        .args(["monitor", "--help"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    for flag in [
        "--csi-address",
        "--monitor-interval",
        "--timeout",
        "--leader-election",
        "--http-endpoint",
        "--kubeconfig",
        "--list-page-size",
        "--worker-threads",
        "--kube-api-qps",
        "--kube-api-burst",
        "--health-secret",
    ] {
        assert!(text.contains(flag), "monitor --help lacks {flag}");
    }
}
