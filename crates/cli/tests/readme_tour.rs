//! The README's tour, run as a newcomer pastes it: every `sh` block of the "Five-minute tour"
//! section (and every `sh` block the README or a file in docs/ marks with
//! `<!-- checked against up -->`) is read from README.md and docs/ themselves and run in order
//! (the README's, then docs/ by file name), in one shell, in a checkout more than 200 bytes deep,
//! against `volhealth up` started there the way the tour's first step starts it. `cargo run
//! [-q] -- ARGS` is answered by the binary under test, so the commands run exactly as written.
//! Then Ctrl-C, as the last step says, and the resume command `up` prints is run as printed.
//! The docs cannot drift from the program without this test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{bin, have_tool, wait_for};

/// The README, as the repository has it.
const README: &str = include_str!("../../../README.md");

/// The docs under `docs/`, in file name order; their marked blocks run after the README's.
fn docs() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect()
}

/// Every `sh` block to run: the README's tour and marked blocks, then those marked in docs/.
fn all_blocks() -> Vec<String> {
    let mut out = blocks(README);
    for doc in docs() {
        out.extend(blocks(&doc));
    }
    out
}

/// The marker that adds a block outside the tour section.
const MARKER: &str = "<!-- checked against up -->";

/// The tour's first step, which the test carries out itself (on a free port).
const START: &str = "cargo run -- up";

/// How long the whole tour may take.
const TOUR_LIMIT: Duration = Duration::from_secs(600);

/// The `sh` blocks of one document to run, in its order.
fn blocks(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_tour = false;
    let mut marked = false;
    let mut block: Option<String> = None;
    for line in readme.lines() {
        if let Some(text) = block.as_mut() {
            if line.trim_start() == "```" {
                out.push(std::mem::take(text));
                block = None;
            } else {
                text.push_str(line);
                text.push('\n');
            }
            continue;
        }
        if line.starts_with("## ") {
            in_tour = line.starts_with("## Five-minute tour");
        }
        if line.trim() == "```sh" && (in_tour || marked) {
            block = Some(String::new());
        }
        if !line.trim().is_empty() {
            marked = line.trim() == MARKER;
        }
    }
    out
}

/// `cargo` as the README uses it: `cargo run [FLAGS] -- ARGS` runs the binary under test.
fn write_cargo_shim(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("cargo");
    std::fs::write(
        &path,
        "#!/bin/sh\n\
         [ \"$1\" = run ] || { echo \"the tour runs only 'cargo run', not: cargo $*\" >&2; exit 2; }\n\
         while [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\n\
         [ $# -gt 0 ] && shift\n\
         exec \"$VOLHEALTH_BIN\" \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs `script` with bash in `cwd`, failing the test with its output if it fails or hangs.
fn run_script(script: &str, cwd: &Path, path: &str, log: &Path) {
    let out = std::fs::File::create(log).unwrap();
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .env("PATH", path)
        .env("VOLHEALTH_BIN", bin())
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + TOUR_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the tour did not finish within {TOUR_LIMIT:?}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::park_timeout(Duration::from_millis(200));
    };
    assert!(
        status.success(),
        "a README command failed ({status}); the output, each block announced by `### block`:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

#[test]
fn the_tour_section_is_found() {
    let blocks = all_blocks();
    assert!(blocks.len() >= 8, "{blocks:#?}");
    assert_eq!(blocks[0].trim(), START, "the tour starts `up` first");
    assert!(
        blocks.iter().any(|b| b.contains("endpoints.json")),
        "the marked metrics block is included"
    );
}

#[test]
fn the_readme_tour_runs_as_pasted() {
    if !have_tool("kubectl", &["version", "--client"]) || !have_tool("jq", &["--version"]) {
        return;
    }
    let blocks = all_blocks();
    // Step 1, as written, but on a free port: tests run side by side.
    let mut cluster = Cluster::start_in_checkout(3, &[]);
    let checkout = cluster.checkout.clone().unwrap();
    let shim = cluster.tmp.path().join("shim");
    write_cargo_shim(&shim);
    let path = format!(
        "{}:{}",
        shim.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let mut script = String::from("set -euo pipefail\n");
    for (i, block) in blocks.iter().enumerate() {
        if block.lines().any(|l| l.trim() == START) {
            continue;
        }
        script.push_str(&format!("echo '### block {}'\n{block}", i + 1));
    }
    let log = cluster.tmp.path().join("tour.log");
    run_script(&script, &checkout, &path, &log);
    let output = std::fs::read_to_string(&log).unwrap();
    assert!(
        output.contains("csinode/node-3") && output.contains("pvc/data-1"),
        "step 5 shows the conditions:\n{output}"
    );

    // The last step: Ctrl-C, then the command `up` printed resumes it as it was.
    assert_eq!(cluster.interrupt(), Some(0));
    let up_log = std::fs::read_to_string(cluster.up_log()).unwrap();
    let resume = up_log
        .lines()
        .find_map(|l| {
            l.strip_prefix("stopped; run `")
                .and_then(|r| r.strip_suffix("` again to resume"))
        })
        .unwrap_or_else(|| panic!("no resume hint:\n{up_log}"));
    assert!(
        resume.contains("--listen 127.0.0.1:0"),
        "the hint keeps every flag: {resume}"
    );
    let resumed_log = cluster.tmp.path().join("resumed.log");
    let out = std::fs::File::create(&resumed_log).unwrap();
    let mut resumed = Command::new("bash")
        .arg("-c")
        .arg(format!("exec {resume}"))
        .current_dir(&checkout)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let text = wait_for(Duration::from_secs(120), "the resumed up", || {
        let text = std::fs::read_to_string(&resumed_log).unwrap_or_default();
        if text.contains("Press Ctrl-C") {
            return Some(text);
        }
        if let Ok(Some(status)) = resumed.try_wait() {
            panic!("the resume command exited ({status}):\n{text}");
        }
        None
    });
    let _ = kill(Pid::from_raw(resumed.id() as i32), Signal::SIGINT);
    let stopped = wait_for(Duration::from_secs(30), "the resumed up to stop", || {
        resumed.try_wait().ok().flatten()
    });
    assert!(stopped.success(), "{text}");
    assert!(
        text.contains("resuming the cluster") && text.contains("ok (all there)"),
        "a resumed up says it kept the samples, not that it created them:\n{text}"
    );
    assert!(
        !text.contains("creating"),
        "nothing is claimed to be created:\n{text}"
    );
}
