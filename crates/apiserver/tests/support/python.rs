//! The Python `kubernetes` client (PyPI >= 37, which has the KEP-1432 models) against a test's
//! server. The interpreter comes from VOLHEALTH_PYTHON (default `python3`).

use std::ffi::OsStr;
use std::process::Command;

const PROBE: &str =
    "import sys, kubernetes; sys.exit(0 if int(kubernetes.__version__.split('.')[0]) >= 37 else 1)";

/// The interpreter, when it has the client; None when not (the test is skipped, or fails under
/// `VOLHEALTH_REQUIRE_TOOLS=1`, see `have_tool`).
pub fn with_client() -> Option<String> {
    let python = volhealth_testkit::python();
    super::have_tool(&python, &["-c", PROBE]).then_some(python)
}

/// Runs `python ARGS...`, which must succeed and print `OK`; `what` names the run in a failure.
pub fn run_ok(python: &str, args: &[&OsStr], what: &str) {
    let out = Command::new(python)
        .args(args)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("OK"),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
