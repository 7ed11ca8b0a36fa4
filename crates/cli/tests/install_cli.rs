//! Installing like a CLI: shell completions and man pages generated from the clap definitions,
//! and the kubectl plugin link to the running binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use assert_cmd::Command;

fn volhealth() -> Command {
    Command::cargo_bin("volhealth").expect("the volhealth binary")
}

#[test]
fn completions_cover_the_subcommands_in_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = volhealth()
            .args(["completions", shell])
            .output()
            .expect("run");
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        for word in ["volhealth", "monitor", "agent", "status", "node-name"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    let bash = volhealth()
        .args(["completions", "bash"])
        .output()
        .expect("run");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("volhealth.bash");
    std::fs::write(&file, &bash.stdout).expect("write");
    // The script must at least be valid bash.
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&file)
        .status();
    if let Ok(status) = syntax {
        assert!(status.success(), "bash -n on the completion script");
    }
    volhealth().args(["completions", "tcsh"]).assert().failure();
}

#[test]
fn man_pages_are_written_for_every_subcommand() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("man1");
    volhealth().arg("man").arg(&out_dir).assert().success();
    for page in [
        "volhealth",
        "volhealth-monitor",
        "volhealth-agent",
        "volhealth-up",
        "volhealth-inject-volume",
    ] {
        let text = std::fs::read_to_string(out_dir.join(format!("{page}.1")))
            .unwrap_or_else(|e| panic!("{page}.1: {e}"));
        assert!(text.contains(".TH"), "{page}.1 is no man page");
    }
    let monitor = std::fs::read_to_string(out_dir.join("volhealth-monitor.1")).expect("read");
    assert!(monitor.contains("monitor\\-interval"), "{monitor}");
    assert!(!out_dir.join("volhealth-help.1").exists());
}

#[test]
fn kubectl_plugin_links_to_this_binary_and_runs_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin_dir = dir.path().join("bin");
    volhealth()
        .arg("kubectl-plugin")
        .arg(&bin_dir)
        .assert()
        .success();
    // Again: the old link is replaced, not an error.
    volhealth()
        .arg("kubectl-plugin")
        .arg(&bin_dir)
        .assert()
        .success();
    let link = bin_dir.join("kubectl-volhealth");
    let target = std::fs::read_link(&link).expect("a symlink");
    let me = std::path::PathBuf::from(env!("CARGO_BIN_EXE_volhealth"));
    assert_eq!(target.canonicalize().ok(), me.canonicalize().ok());
    // Run as kubectl-volhealth it is `volhealth status`.
    let out = std::process::Command::new(&link)
        .arg("--help")
        .output()
        .expect("run the plugin");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--watch"));

    std::fs::remove_file(&link).expect("remove");
    std::fs::write(&link, "not a link").expect("write");
    volhealth()
        .arg("kubectl-plugin")
        .arg(&bin_dir)
        .assert()
        .failure();
}
