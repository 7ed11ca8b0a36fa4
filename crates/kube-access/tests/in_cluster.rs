//! In-cluster configuration against the embedded API server over TLS: with no kubeconfig, a
//! client from `client::load(None)` finds the server through `KUBERNETES_SERVICE_HOST` and
//! `KUBERNETES_SERVICE_PORT`, trusts the service account's `ca.crt` and authenticates with its
//! `token`; when the token file is rotated, the next request carries the new token.
//!
//! Environment variables are process-wide, so the client side runs in a child process (this
//! test binary again, running only `client_side`) with its own environment.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Set in the child process only.
const CHILD: &str = "VOLHEALTH_TEST_IN_CLUSTER_CHILD";

/// Two node identities, so a refusal's message says which token was sent.
const TOKENS: &str =
    "oldtoken,system:node:old,1,\"system:nodes\"\nnewtoken,system:node:new,2,\"system:nodes\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_cluster_config_authenticates_and_follows_a_rotated_token() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = volhealth_testkit::write_token_file(dir.path(), TOKENS);
    let mut config = volhealth_apiserver::ServerConfig::new(dir.path().join("data"));
    config.tokens = Some(volhealth_apiserver::authz::Tokens::load(&tokens).unwrap());
    config.tls = Some(volhealth_apiserver::TlsConfig::default());
    config.write_kubeconfig = Some(dir.path().join("kubeconfig"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(volhealth_apiserver::serve(listener, config, async {
        let _ = stopped.await;
    }));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !dir.path().join("kubeconfig").exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let sa = dir.path().join("serviceaccount");
    std::fs::create_dir(&sa).unwrap();
    std::fs::copy(dir.path().join("data/pki/ca.crt"), sa.join("ca.crt")).unwrap();
    std::fs::write(sa.join("token"), "oldtoken\n").unwrap();
    std::fs::write(sa.join("namespace"), "kube-system\n").unwrap();

    let out = tokio::task::spawn_blocking(move || {
        Command::new(std::env::current_exe().unwrap())
            .args(["client_side", "--exact", "--ignored", "--nocapture"])
            .env(CHILD, "1")
            .env_remove("KUBECONFIG")
            .env("HOME", "/nonexistent")
            .env(
                volhealth_kube_access::client::in_cluster::SERVICEACCOUNT_DIR_ENV,
                &sa,
            )
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", port.to_string())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("IN-CLUSTER OK"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

/// Who the server says the client is: the user named in the refusal to list Secrets.
async fn who(client: &kube::Client) -> String {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) if s.code == 403 => s.message,
        other => panic!("expected a 403 for a node listing secrets, got {other:?}"),
    }
}

/// The client half, run by the test above in a child process with the in-cluster environment.
#[tokio::test]
#[ignore = "run by in_cluster_config_authenticates_and_follows_a_rotated_token"]
async fn client_side() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let sa = std::env::var_os(volhealth_kube_access::client::in_cluster::SERVICEACCOUNT_DIR_ENV)
        .unwrap();
    let token = Path::new(&sa).join("token");
    let loaded = volhealth_kube_access::client::load(None).await.unwrap();
    assert_eq!(loaded.default_namespace, "kube-system");
    assert_eq!(loaded.kubeconfig_user, None);
    let first = who(&loaded.client).await;
    assert!(first.contains("User \"system:node:old\""), "{first}");
    // Rotated as the kubelet does: a new file renamed over the old one.
    let next = Path::new(&sa).join(".token.new");
    std::fs::write(&next, "newtoken\n").unwrap();
    std::fs::rename(&next, &token).unwrap();
    let second = who(&loaded.client).await;
    assert!(second.contains("User \"system:node:new\""), "{second}");
    println!("IN-CLUSTER OK");
}
