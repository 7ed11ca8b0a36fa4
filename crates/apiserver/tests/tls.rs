//! The API server over TLS, as real clients use it: kube-rs with the kubeconfig the server
//! writes (CA and token) and with client-certificate kubeconfigs (CN = user, O = groups),
//! kubectl and the Python client the same way, and what is refused: a client certificate of
//! another CA, a wrong token next to a good certificate, plain HTTP on the TLS port, and a
//! connection that never does its handshake. The certificates in `<data-dir>/pki` are kept across
//! restarts and the serving one is made again when the names it must cover change.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use volhealth_apiserver::kubeconfig::{self, Kubeconfig as KubeconfigFile};
use volhealth_apiserver::tls;
use volhealth_testkit::kubectl::Kubectl;

/// How long a test waits for the server to do something it must do.
const PATIENCE: Duration = Duration::from_secs(20);

const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n";

fn start(dir: &Path, extra: &[&str]) -> support::ApiServer {
    let flags = volhealth_testkit::token_flags(dir, TOKENS, extra);
    support::start_tls_apiserver(dir, &flags.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Writes a kubeconfig at `path` for `server` with a client certificate for (user, groups)
/// signed by the CA of `ca_data_dir`, trusting the server's own CA.
fn cert_kubeconfig(
    server: &support::ApiServer,
    dir: &Path,
    ca_data_dir: &Path,
    user: &str,
    groups: &[&str],
    token: Option<&str>,
) -> PathBuf {
    let cert = tls::issue_client_cert(ca_data_dir, user, groups).unwrap();
    let server_ca = std::fs::read_to_string(dir.join("data/pki/ca.crt")).unwrap();
    let mut kc = KubeconfigFile::with_client_cert(&server.url, Some(&server_ca), cert);
    kc.token = token.map(str::to_string);
    let path = dir.join(format!(
        "kubeconfig-{}-{}",
        user.replace(':', "-"),
        token.unwrap_or("")
    ));
    kubeconfig::write(&path, &kc).unwrap();
    path
}

/// A kubeconfig with node-a's certificate, from the server's own CA.
fn node_kubeconfig(server: &support::ApiServer, dir: &Path) -> PathBuf {
    let ca_data_dir = dir.join("data");
    cert_kubeconfig(
        server,
        dir,
        &ca_data_dir,
        "system:node:node-a",
        &["system:nodes"],
        None,
    )
}

/// A kubeconfig with an administrator's certificate from the CA in `ca_data_dir`, and `token`.
fn admin_kubeconfig(
    server: &support::ApiServer,
    dir: &Path,
    ca_data_dir: &Path,
    token: Option<&str>,
) -> PathBuf {
    cert_kubeconfig(
        server,
        dir,
        ca_data_dir,
        "volhealth-admin",
        &["system:masters"],
        token,
    )
}

async fn client(path: &Path) -> kube::Client {
    let kc = Kubeconfig::read_from(path).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    kube::Client::try_from(config).expect("kube client")
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn pvc(name: &str) -> PersistentVolumeClaim {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"]}}),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_with_the_written_kubeconfig_and_with_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    let written = std::fs::read_to_string(&server.kubeconfig).unwrap();
    assert!(
        written.contains("certificate-authority-data: ") && written.contains("server: https://"),
        "{written}"
    );

    // The written kubeconfig: the CA, and the token file's first token.
    let admin = client(&server.kubeconfig).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), "default");
    pvcs.create(&PostParams::default(), &pvc("data-1"))
        .await
        .unwrap();

    // A node's certificate: scoped as a node, and the denial names the certificate's CN.
    let node_kc = node_kubeconfig(&server, dir.path());
    let node = client(&node_kc).await;
    let node_pvcs: Api<PersistentVolumeClaim> = Api::namespaced(node.clone(), "default");
    // The certificate makes it a node: it may list pods, but, like a kubelet, no claims.
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(node.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("a node lists pods");
    let listed = node_pvcs.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&listed, kube::Error::Api(s) if s.code == 403 && s.message.contains("system:node:node-a")),
        "{listed}"
    );
    let patch = json!({"status": {"healthStatus": {"healthConditions": [{"status": "Inaccessible", "reason": "X"}]}}});
    let denied = node_pvcs
        .patch_status("data-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &denied else {
        panic!("expected a 403, got {denied:?}");
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains("User \"system:node:node-a\""),
        "{}",
        status.message
    );

    // An administrator's certificate may do what the node may not.
    let admin_kc = admin_kubeconfig(&server, dir.path(), &dir.path().join("data"), None);
    let admin_cert: Api<PersistentVolumeClaim> =
        Api::namespaced(client(&admin_kc).await, "default");
    admin_cert
        .patch_status("data-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    // A wrong token is 401 even next to a good certificate: the token decides.
    let both_kc = admin_kubeconfig(
        &server,
        dir.path(),
        &dir.path().join("data"),
        Some("wrongtoken"),
    );
    let both: Api<Namespace> = Api::all(client(&both_kc).await);
    let e = both.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&e), Some(401), "{e:?}");

    // No credentials at all (the CA only): 401, as without TLS.
    let anonymous_kc = dir.path().join("kubeconfig-anonymous");
    let ca = std::fs::read_to_string(dir.path().join("data/pki/ca.crt")).unwrap();
    kubeconfig::write(
        &anonymous_kc,
        &KubeconfigFile {
            server: server.url.clone(),
            ca_pem: Some(ca),
            ..KubeconfigFile::default()
        },
    )
    .unwrap();
    let anonymous: Api<Namespace> = Api::all(client(&anonymous_kc).await);
    let e = anonymous.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&e), Some(401), "{e:?}");

    // A certificate signed by another CA does not get through the handshake.
    let other = tempfile::tempdir().unwrap();
    let foreign_kc = admin_kubeconfig(&server, dir.path(), other.path(), None);
    let foreign: Api<Namespace> = Api::all(client(&foreign_kc).await);
    let e = foreign.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&e), None, "refused before HTTP: {e:?}");
}

fn rustls_client(ca_pem: &str, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// Does a TLS handshake with `addr` for `name`; the protocol ALPN picked.
async fn handshake(
    addr: &str,
    name: &str,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<Option<Vec<u8>>> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    Ok(tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec))
}

fn addr(server: &support::ApiServer) -> String {
    server.url.strip_prefix("https://").unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_and_http1_are_offered_over_alpn() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let ca = std::fs::read_to_string(dir.path().join("data/pki/ca.crt")).unwrap();
    let a = addr(&server);
    for (offer, picked) in [
        (
            &[b"h2".as_slice(), b"http/1.1".as_slice()][..],
            b"h2".as_slice(),
        ),
        (&[b"http/1.1".as_slice()][..], b"http/1.1".as_slice()),
    ] {
        let got = handshake(&a, "127.0.0.1", rustls_client(&ca, offer))
            .await
            .unwrap();
        assert_eq!(got.as_deref(), Some(picked));
    }
    // The serving certificate covers localhost and ::1 as well.
    handshake(&a, "localhost", rustls_client(&ca, &[]))
        .await
        .unwrap();
}

#[test]
fn plain_http_and_missing_handshakes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = support::config_from_flags(dir.path(), &[]);
    config.tls = Some(volhealth_apiserver::TlsConfig::default());
    config.header_read_timeout = Duration::from_secs(1);
    let server = support::start_with_config(config);
    let a = addr(&server);

    let mut plain = TcpStream::connect(&a).unwrap();
    plain
        .write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let answer = support::read_to_close(&mut plain, PATIENCE).expect("answered and closed");
    assert!(
        answer.starts_with("HTTP/1.0 400") && answer.contains("HTTP request to an HTTPS server"),
        "{answer}"
    );

    let mut silent = TcpStream::connect(&a).unwrap();
    assert!(
        support::read_to_close(&mut silent, PATIENCE).is_some(),
        "a connection that never sends must not be held"
    );
    // A handshake begun and never finished is dropped too.
    let mut stalled = TcpStream::connect(&a).unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01, 0x02]).unwrap();
    assert!(
        support::read_to_close(&mut stalled, PATIENCE).is_some(),
        "a handshake that never finishes must not hold its connection"
    );
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_are_kept_and_the_serving_one_follows_the_names() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("data/pki");
    let read = |f: &str| std::fs::read_to_string(pki.join(f)).unwrap();
    let server = start(dir.path(), &[]);
    let (ca, serving) = (read("ca.crt"), read("apiserver.crt"));
    #[cfg(unix)]
    for key in ["ca.key", "apiserver.key"] {
        assert_eq!(mode(&pki.join(key)), 0o600, "{key}");
    }
    drop(server); // stops it, and waits until it has let go of its data

    let server = start(dir.path(), &[]);
    assert_eq!(
        (read("ca.crt"), read("apiserver.crt")),
        (ca.clone(), serving.clone())
    );
    let refused = handshake(&addr(&server), "volhealth.example", rustls_client(&ca, &[])).await;
    assert!(refused.is_err(), "a name the certificate does not cover");
    drop(server); // stops it, and waits until it has let go of its data

    let server = start(
        dir.path(),
        &["--tls-san", "volhealth.example", "--tls-san", "10.1.2.3"],
    );
    assert_eq!(read("ca.crt"), ca, "the CA is kept");
    assert_ne!(
        read("apiserver.crt"),
        serving,
        "the serving certificate is made again"
    );
    handshake(&addr(&server), "volhealth.example", rustls_client(&ca, &[]))
        .await
        .unwrap();
    // A client trusting the kept CA still works, with the written kubeconfig.
    let namespaces: Api<Namespace> = Api::all(client(&server.kubeconfig).await);
    namespaces.get("default").await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client(&server.kubeconfig).await, "default");
    secrets.list(&ListParams::default()).await.unwrap();
}

#[test]
fn kubectl_with_the_written_kubeconfig_and_a_node_certificate() {
    if !support::kubectl::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let out = Kubectl::new(&server, dir.path()).run(&["get", "namespaces"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("kube-system"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node_kc = node_kubeconfig(&server, dir.path());
    let node = Kubectl::with_kubeconfig(&node_kc, dir.path());
    let out = node.run(&["get", "pods"]);
    assert!(
        out.status.success(),
        "a node may list pods: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = node.run(&["get", "secrets"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("User \"system:node:node-a\" cannot list"),
        "{stderr}"
    );
}

/// Lists namespaces with the kubeconfig in argv[1]; with argv[2], expects listing secrets to be
/// refused with a message naming the user argv[2].
const SCRIPT: &str = r#"
import json, sys
from kubernetes import client, config
api = client.CoreV1Api(config.new_client_from_config(config_file=sys.argv[1]))
names = [n.metadata.name for n in api.list_namespace().items]
assert "kube-system" in names, names
if len(sys.argv) > 2:
    try:
        api.list_namespaced_secret("default")
        sys.exit("listing secrets was allowed")
    except client.exceptions.ApiException as e:
        assert e.status == 403, e.status
        message = json.loads(e.body)["message"]
        assert ('User "%s"' % sys.argv[2]) in message, message
print("OK")
"#;

#[test]
fn python_client_with_the_written_kubeconfig_and_a_node_certificate() {
    let Some(python) = support::python_with_kubernetes_client() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let node_kc = node_kubeconfig(&server, dir.path());
    let runs: [Vec<&std::ffi::OsStr>; 2] = [
        vec![server.kubeconfig.as_os_str()],
        vec![node_kc.as_os_str(), "system:node:node-a".as_ref()],
    ];
    for args in runs {
        let run = [&["-c".as_ref(), SCRIPT.as_ref()], &args[..]].concat();
        support::run_python_ok(&python, &run, &format!("{args:?}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limits_hold_over_tls() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A request head begun after the handshake and never finished is timed out as over HTTP.
    let dir = tempfile::tempdir().unwrap();
    let mut config = support::config_from_flags(dir.path(), &[]);
    config.tls = Some(volhealth_apiserver::TlsConfig::default());
    config.header_read_timeout = Duration::from_secs(1);
    let server = support::start_with_config(config);
    let ca = std::fs::read_to_string(dir.path().join("data/pki/ca.crt")).unwrap();
    let connector = tokio_rustls::TlsConnector::from(rustls_client(&ca, &[b"http/1.1"]));
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tcp = tokio::net::TcpStream::connect(addr(&server)).await.unwrap();
    let mut tls = connector.connect(name.clone(), tcp).await.unwrap();
    tls.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(PATIENCE, tls.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "a request head never finished must not hold its TLS connection"
    );
    drop(server);

    // The connection cap counts connections still in their handshake; when they fill it, the
    // oldest is shed for a new one.
    let dir = tempfile::tempdir().unwrap();
    let mut config = support::config_from_flags(dir.path(), &[]);
    config.tls = Some(volhealth_apiserver::TlsConfig::default());
    config.max_connections = 2;
    config.header_read_timeout = Duration::from_secs(120);
    let server = support::start_with_config(config);
    let ca = std::fs::read_to_string(dir.path().join("data/pki/ca.crt")).unwrap();
    let connector = tokio_rustls::TlsConnector::from(rustls_client(&ca, &[]));
    let mut idle = [
        tokio::net::TcpStream::connect(addr(&server)).await.unwrap(),
        tokio::net::TcpStream::connect(addr(&server)).await.unwrap(),
    ];
    let tcp = tokio::net::TcpStream::connect(addr(&server)).await.unwrap();
    tokio::time::timeout(PATIENCE, connector.connect(name, tcp))
        .await
        .expect("a third connection is served at once")
        .unwrap();
    let mut byte = [0u8; 1];
    let shed = tokio::time::timeout(PATIENCE, idle[0].read(&mut byte)).await;
    assert!(
        matches!(shed, Ok(Ok(0)) | Ok(Err(_))),
        "the oldest connection without a ClientHello is closed for it: {shed:?}"
    );
}
