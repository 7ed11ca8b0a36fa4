//! `volhealth conformance` against the reference driver, both real processes over a unix socket,
//! with the driver's own `inject conformance` adapter: every case passes or is skipped for a
//! stated reason, the exit code is 0, and the JUnit XML is well-formed and counts right.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::{Proc, bin, volhealth, volhealth_with_env, wait_for};

/// Cases that must PASS against the reference driver (everything it supports).
const MUST_PASS: &[&str] = &[
    "identity.plugin_info",
    "capabilities.list_implies_get",
    "capabilities.advertised_rpcs_answer",
    "controller.get.unknown_volume_not_found",
    "controller.get.empty_volume_id_invalid_argument",
    "controller.get.healthy_volume_empty",
    "controller.list.bad_token_aborted",
    "controller.list.max_entries_respected",
    "controller.list.tokens_terminate",
    "controller.list.conditions_reachable",
    "controller.list.concurrent_create_tolerated",
    "node.get.unknown_volume_not_found",
    "node.get.empty_volume_id_invalid_argument",
    "node.get.stage_attempted",
    "node.get.published",
    "node.storage.answers",
    "secrets.not_echoed",
    "inject.controller.inaccessible",
    "inject.controller.data_loss",
    "inject.controller.degraded",
    "inject.node.inaccessible",
    "inject.node.data_loss",
    "inject.node.degraded",
    "inject.storage.storage_unreachable",
    "inject.storage.storage_degraded",
    "entries.volume_ids_known",
    "entries.status_known",
    "entries.reason_format",
    "entries.message_length",
    "entries.no_duplicate_status_reason",
    "storage.entries_valid",
    "latency.report",
];

/// Starts `volhealth driver` on `<dir>/csi.sock` with state in `<dir>/state`.
fn start_driver(dir: &Path, extra: &[&str]) -> (Proc, String, PathBuf) {
    start_driver_with_env(dir, extra, &[])
}

fn start_driver_with_env(
    dir: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Proc, String, PathBuf) {
    let socket = dir.join("csi.sock");
    let endpoint = format!("unix://{}", socket.display());
    let state = dir.join("state");
    let state_s = state.display().to_string();
    let mut args = vec![
        "driver",
        "--endpoint",
        &endpoint,
        "--state-dir",
        &state_s,
        "--node-id",
        "node-a",
        "--no-mounts",
        "--refresh-interval-ms",
        "100",
    ];
    args.extend_from_slice(extra);
    let driver = volhealth_with_env("driver", dir, &args, env);
    wait_for(Duration::from_secs(30), "the driver's socket", || {
        std::os::unix::net::UnixStream::connect(&socket)
            .ok()
            .map(|_| ())
    });
    (driver, endpoint, state)
}

/// Volume records left in the driver's state dir.
fn leftover_volumes(state: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(state.join("records"))
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

#[test]
fn the_reference_driver_passes_the_suite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_driver, endpoint, state) = start_driver(dir.path(), &[]);
    let junit = dir.path().join("junit.xml");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    let inject = format!(
        "'{}' inject --state-dir '{}' conformance",
        bin().display(),
        state.display()
    );
    let out = Command::new(bin())
        .args([
            "conformance",
            "--csi-address",
            &endpoint,
            "--inject-cmd",
            &inject,
        ])
        .arg("--junit")
        .arg(&junit)
        .arg("--work-dir")
        .arg(&work)
        .args(["--inject-timeout", "20"])
        .output()
        .expect("run volhealth conformance");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "conformance failed against the reference driver:\n{stdout}\n{stderr}\ndriver log:\n{}",
        std::fs::read_to_string(dir.path().join("driver.log")).unwrap_or_default()
    );
    for name in MUST_PASS {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("PASS") && l.split_whitespace().nth(1) == Some(name)),
            "{name} did not pass:\n{stdout}"
        );
    }

    let xml = std::fs::read_to_string(&junit).expect("JUnit file written");
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML parses");
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("a testsuite element");
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let count = |tag: &str| {
        cases
            .iter()
            .filter(|c| c.children().any(|n| n.has_tag_name(tag)))
            .count()
    };
    let attr = |name: &str| -> usize {
        suite
            .attribute(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("testsuite@{name} missing"))
    };
    assert_eq!(attr("tests"), cases.len());
    assert_eq!(attr("failures"), count("failure"));
    assert_eq!(attr("failures"), 0);
    assert_eq!(attr("skipped"), count("skipped"));
    assert!(cases.len() >= MUST_PASS.len());
    for c in &cases {
        assert!(c.attribute("name").is_some() && c.attribute("classname").is_some());
        assert!(
            c.attribute("time")
                .and_then(|t| t.parse::<f64>().ok())
                .is_some()
        );
    }
    // Nothing the run created is left.
    let leftovers = leftover_volumes(&state);
    assert!(leftovers.is_empty(), "volumes left behind: {leftovers:?}");
}

#[test]
fn secrets_from_the_file_are_accepted_and_never_printed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let value = "s3cr3t-value-for-conformance";
    let require = format!("token={value}");
    // The driver takes the pair from its environment, as a container would get it from a Secret.
    let (_driver, endpoint, _state) =
        start_driver_with_env(dir.path(), &[], &[("VOLHEALTH_REQUIRE_SECRET", &require)]);
    let secrets = dir.path().join("secrets");
    std::fs::write(&secrets, format!("# test\ntoken={value}\n")).expect("secrets file");
    let junit = dir.path().join("junit.xml");
    let out = Command::new(bin())
        .args(["conformance", "--csi-address", &endpoint, "--secrets-file"])
        .arg(&secrets)
        .arg("--junit")
        .arg(&junit)
        .output()
        .expect("run volhealth conformance");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("PASS") && l.contains("secrets.accepted")),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&junit).expect("junit");
    for text in [&*stdout, &*stderr, &xml] {
        assert!(!text.contains(value), "the secret value was printed");
    }

    // Without the secrets the driver refuses the controller health RPCs, and the suite fails.
    let out = Command::new(bin())
        .args(["conformance", "--csi-address", &endpoint])
        .output()
        .expect("run volhealth conformance");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("FAIL")), "{stdout}");
}

#[test]
fn ctrl_c_stops_the_run_and_cleans_up_what_it_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_driver, endpoint, state) = start_driver(dir.path(), &[]);
    let marker = dir.path().join("injecting");
    // `set` blocks, so the run is surely in the middle of its injection cases when interrupted.
    let inject = format!(
        "f() {{ if [ \"$1\" = set ]; then touch '{}'; sleep 60; fi; }}; f",
        marker.display()
    );
    let mut run = volhealth(
        "conformance",
        dir.path(),
        &[
            "conformance",
            "--csi-address",
            &endpoint,
            "--inject-cmd",
            &inject,
        ],
    );
    wait_for(Duration::from_secs(60), "the first injection", || {
        marker.exists().then_some(())
    });
    assert!(
        !leftover_volumes(&state).is_empty(),
        "the run had created volumes"
    );
    kill(Pid::from_raw(run.child.id() as i32), Signal::SIGINT).expect("send SIGINT");
    let status = wait_for(Duration::from_secs(30), "conformance to stop", || {
        run.child.try_wait().ok().flatten()
    });
    let log = std::fs::read_to_string(dir.path().join("conformance.log")).unwrap_or_default();
    assert!(
        !status.success(),
        "an interrupted run must not succeed:\n{log}"
    );
    assert!(log.contains("interrupted"), "{log}");
    let leftovers = leftover_volumes(&state);
    assert!(
        leftovers.is_empty(),
        "volumes left behind: {leftovers:?}\n{log}"
    );
}
