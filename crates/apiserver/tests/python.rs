//! The Python `kubernetes` client (PyPI >= 37, which has the KEP-1432 models) against
//! the API server, driven by `tests/python/test_client.py`. The interpreter comes from
//! VOLHEALTH_PYTHON (default `python3`); skipped when the client is missing or older than 37,
//! failed instead under VOLHEALTH_REQUIRE_TOOLS=1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::path::PathBuf;

#[test]
fn python_client_lists_patches_and_watches() {
    let Some(python) = support::python_with_kubernetes_client() else {
        return;
    };
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/test_client.py");
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    let args = [script.as_os_str(), server.kubeconfig.as_os_str()];
    support::run_python_ok(&python, &args, "test_client.py");
}
