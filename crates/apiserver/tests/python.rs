//! The Python `kubernetes` client (PyPI >= 37, which has the KEP-1432 models) against
//! the API server, driven by `tests/python/test_client.py`. The interpreter comes from
//! VOLHEALTH_PYTHON (default `python3`); skipped when the client is missing or older than 37,
//! failed instead under VOLHEALTH_REQUIRE_TOOLS=1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::path::PathBuf;
use std::process::Command;

const PROBE: &str =
    "import sys, kubernetes; sys.exit(0 if int(kubernetes.__version__.split('.')[0]) >= 37 else 1)";

#[test]
fn python_client_lists_patches_and_watches() {
    let python = std::env::var("VOLHEALTH_PYTHON").unwrap_or_else(|_| "python3".into());
    if !support::have_tool(&python, &["-c", PROBE]) {
        return;
    }
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/test_client.py");
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    let out = Command::new(&python)
        .arg(&script)
        .arg(&server.kubeconfig)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("OK"),
        "test_client.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
