//! `volhealth remediate` refuses a bad policy file before it does anything, naming the file and
//! each problem's line.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use assert_cmd::Command;

#[test]
fn a_bad_policy_file_is_refused_with_its_lines() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "rules:\n- name: r\n  match: {object: CSINode, status: Inaccessible}\n  actions: [{taint: {key: k, effect: Never}}]\n",
    )
    .unwrap();
    let out = Command::cargo_bin("volhealth")
        .unwrap()
        .args([
            "remediate",
            "--kubeconfig",
            "/nonexistent",
            "--dry-run=false",
            "--policy",
        ])
        .arg(&policy)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("policy.yaml"), "{err}");
    assert!(
        err.contains("line 2: rules[0] (\"r\"): match.status \"Inaccessible\""),
        "{err}"
    );
    assert!(
        err.contains("line 2: rules[0] (\"r\"): taint.effect \"Never\""),
        "{err}"
    );
}
