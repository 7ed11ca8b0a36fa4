//! The binary's entry points: help, version, and a clear failure for a wrong command.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use assert_cmd::Command;

fn volhealth() -> Command {
    Command::new(env!("CARGO_BIN_EXE_volhealth"))
}

/// What `volhealth ARGS...` prints on standard output, asserting that it succeeds.
fn stdout_of(args: &[&str]) -> String {
    let out = volhealth().args(args).assert().success();
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

#[test]
fn help_lists_every_subcommand() {
    let text = stdout_of(&["--help"]);
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
    // The release and the git revision it was built from.
    assert_eq!(
        stdout_of(&["--version"]).trim(),
        format!(
            "volhealth {} (git {})",
            env!("CARGO_PKG_VERSION"),
            volhealth_daemon::build_info::REVISION
        )
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
    let text = stdout_of(&["monitor", "--help"]);
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

/// The options part of a help text: everything after its first line and usage line.
fn options_of(help: &[u8]) -> String {
    let text = String::from_utf8_lossy(help);
    let start = text.find("Options:").expect("help has an Options section");
    text[start..].to_string()
}

#[test]
fn the_sidecar_binaries_take_exactly_their_subcommands_flags() {
    for (sub, program) in [
        ("agent", env!("CARGO_BIN_EXE_volhealth-agent")),
        ("monitor", env!("CARGO_BIN_EXE_volhealth-monitor")),
    ] {
        let multi = volhealth().args([sub, "--help"]).assert().success();
        let single = Command::new(program).arg("--help").assert().success();
        let (multi, single) = (
            options_of(&multi.get_output().stdout),
            options_of(&single.get_output().stdout),
        );
        assert_eq!(
            multi, single,
            "{program} --help differs from volhealth {sub} --help"
        );
        // A flag the subcommand refuses is refused by the binary too, with clap's exit code.
        Command::new(program).arg("--no-such-flag").assert().code(2);
    }
}
