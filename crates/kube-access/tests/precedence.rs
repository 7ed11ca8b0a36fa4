//! The loading precedence against the real environment: `--kubeconfig`, else `KUBECONFIG`, else
//! in-cluster (`KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`, the service account from
//! `VOLHEALTH_SERVICEACCOUNT_DIR`), else `$HOME/.kube/config`. Each kubeconfig names another
//! server, so the loaded client's URL says which was used.
//!
//! Environment variables are process-wide, so each case runs in a child process (this test
//! binary again, running only `child`) with its own environment. kube's own in-cluster loader
//! reads the fixed `/var/run/secrets/kubernetes.io/serviceaccount`, which a test cannot write:
//! the in-cluster case goes through the service-account directory override, which builds the
//! configuration the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use std::path::Path;
use std::process::Command;

/// Set in the child process only: the `--kubeconfig` path to pass, or empty for none.
const CHILD: &str = "VOLHEALTH_TEST_PRECEDENCE_EXPLICIT";

fn kubeconfig(path: &Path, port: u16) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n\
             clusters: [{{name: k, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n"
        ),
    )
    .unwrap();
}

/// The child's answer: the source and server it loaded, or its error.
fn run(explicit: Option<&Path>, env: &[(&str, &std::ffi::OsStr)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child", "--exact", "--ignored", "--nocapture"])
        .env(CHILD, explicit.map(|p| p.as_os_str()).unwrap_or_default())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove(volhealth_kube_access::client::in_cluster::SERVICEACCOUNT_DIR_ENV);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("LOADED "))
        .unwrap_or_else(|| panic!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
        .to_string()
}

#[test]
fn explicit_then_kubeconfig_env_then_in_cluster_then_the_default_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let explicit = dir.path().join("explicit");
    let from_env = dir.path().join("from-env");
    kubeconfig(&home.join(".kube/config"), 1001);
    kubeconfig(&explicit, 1002);
    kubeconfig(&from_env, 1003);
    let sa = dir.path().join("serviceaccount");
    std::fs::create_dir(&sa).unwrap();
    // Any certificate will do: nothing connects.
    std::fs::write(sa.join("ca.crt"), TEST_CA).unwrap();
    std::fs::write(sa.join("token"), "t\n").unwrap();
    std::fs::write(sa.join("namespace"), "kube-system\n").unwrap();

    let home_env = ("HOME", home.as_os_str());
    let kc_env = ("KUBECONFIG", from_env.as_os_str());
    let in_cluster: [(&str, &std::ffi::OsStr); 3] = [
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1".as_ref()),
        ("KUBERNETES_SERVICE_PORT", "1004".as_ref()),
        (
            volhealth_kube_access::client::in_cluster::SERVICEACCOUNT_DIR_ENV,
            sa.as_os_str(),
        ),
    ];
    let all: Vec<_> = [home_env, kc_env].into_iter().chain(in_cluster).collect();

    let got = run(Some(&explicit), &all);
    assert!(
        got.starts_with("kubeconfig ") && got.ends_with("http://127.0.0.1:1002/ default"),
        "{got}"
    );
    let got = run(None, &all);
    assert!(
        got.starts_with("kubeconfig KUBECONFIG=")
            && got.ends_with("http://127.0.0.1:1003/ default"),
        "{got}"
    );
    let no_kc: Vec<_> = [home_env].into_iter().chain(in_cluster).collect();
    let got = run(None, &no_kc);
    assert_eq!(
        got,
        "in-cluster service account https://127.0.0.1:1004/ kube-system"
    );
    let got = run(None, &[home_env]);
    assert_eq!(
        got,
        "kubeconfig ~/.kube/config http://127.0.0.1:1001/ default"
    );
    // Only a host, no port: not in a cluster (client-go's rule).
    let got = run(None, &[home_env, in_cluster[0]]);
    assert_eq!(
        got,
        "kubeconfig ~/.kube/config http://127.0.0.1:1001/ default"
    );
    let empty_home = dir.path().join("empty");
    let got = run(None, &[("HOME", empty_home.as_os_str())]);
    assert!(
        got.starts_with("ERROR no usable kubeconfig: kubeconfig ~/.kube/config"),
        "{got}"
    );
}

/// The child half, run by the test above in a child process with the environment of one case.
#[tokio::test]
#[ignore = "run by explicit_then_kubeconfig_env_then_in_cluster_then_the_default_kubeconfig"]
async fn child() {
    let Some(explicit) = std::env::var_os(CHILD) else {
        return;
    };
    let explicit = (!explicit.is_empty()).then(|| std::path::PathBuf::from(explicit));
    match volhealth_kube_access::client::load_config(explicit.as_deref(), None).await {
        Ok(l) => println!(
            "LOADED {} {} {}",
            l.source, l.config.cluster_url, l.config.default_namespace
        ),
        Err(e) => println!("LOADED ERROR {e}"),
    }
}

/// A self-signed certificate, only parsed.
const TEST_CA: &str = include_str!("precedence_ca.pem");
