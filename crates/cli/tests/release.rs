//! `scripts/release`, the one command that makes the release archives and the krew manifest:
//! run here on the binaries this test build made (it would otherwise build release binaries),
//! its archive holds the binary, its sha256 file and the manifest agree with the archive, and
//! the manifest has the shape krew reads.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::path::Path;
use std::process::Command;

#[test]
fn the_release_command_packs_the_binary_and_fills_in_the_krew_manifest() {
    if !support::have_tool("tar", &["--version"])
        || !support::have_tool("sha256sum", &["--version"])
    {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = tempfile::tempdir().unwrap();
    let binaries = support::bin().parent().unwrap().to_path_buf();
    let target = "x86_64-unknown-linux-gnu";
    support::output_ok(
        Command::new("bash")
            .arg(root.join("scripts/release"))
            .args([
                "--version",
                "9.8.7",
                "--target",
                target,
                "--base-url",
                "https://example.invalid/dl",
            ])
            .arg("--binaries")
            .arg(&binaries)
            .arg("--out")
            .arg(out.path()),
    );

    let archive = out.path().join("volhealth-v9.8.7-linux-amd64.tar.gz");
    let listed = Command::new("tar")
        .arg("tzf")
        .arg(&archive)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout)
            .lines()
            .collect::<Vec<_>>(),
        ["README.md", "volhealth"]
    );
    let sum = Command::new("sha256sum").arg(&archive).output().unwrap();
    let sha = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let recorded = std::fs::read_to_string(
        out.path()
            .join("volhealth-v9.8.7-linux-amd64.tar.gz.sha256"),
    )
    .unwrap();
    assert!(recorded.starts_with(&sha), "{recorded}");

    let manifest: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(out.path().join("volhealth.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "volhealth");
    assert_eq!(manifest["spec"]["version"], "v9.8.7");
    let platforms = manifest["spec"]["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 1);
    let p = &platforms[0];
    assert_eq!(p["selector"]["matchLabels"]["os"], "linux");
    assert_eq!(p["selector"]["matchLabels"]["arch"], "amd64");
    assert_eq!(
        p["uri"],
        "https://example.invalid/dl/volhealth-v9.8.7-linux-amd64.tar.gz"
    );
    assert_eq!(p["sha256"], sha.as_str());
    assert_eq!(p["bin"], "volhealth");
    assert!(
        p["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["from"] == "volhealth")
    );
}
