//! Shared helpers for the end-to-end tests: they start the real `volhealth` binary as child
//! processes and wait on conditions with deadlines (never fixed sleeps).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A directory under `base` whose path is at least 200 bytes long, as a deep checkout or
/// `--dir` has: sockets under it cannot be addressed by their path alone.
pub fn deep_dir(base: &Path) -> PathBuf {
    let mut dir = base.join("a-checkout-in-a-deep-directory");
    while dir.as_os_str().len() < 200 {
        dir = dir.join("one-more-level-of-nesting");
    }
    dir
}

/// Path of the `volhealth` binary that cargo built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_volhealth"))
}

// The one process, wait, HTTP and tool-probe helper of every crate's tests.
#[allow(unused_imports)]
pub use volhealth_testkit::{
    Proc, block_on, free_port, have_tool, http_get, http_get_ok, promtool_check_metrics,
    wait_for as wait_for_async, wait_for_blocking as wait_for,
};

/// Starts `volhealth ARGS...` with stdout and stderr appended to `<log_dir>/<name>.log`.
pub fn volhealth(name: &str, log_dir: &Path, args: &[&str]) -> Proc {
    Proc::start(&bin(), name, log_dir, None, args, &[])
}

/// Like [`volhealth`], with extra environment variables.
pub fn volhealth_with_env(name: &str, log_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Proc {
    Proc::start(&bin(), name, log_dir, None, args, env)
}

/// Runs `cmd` to its end and returns its output, failing the test (showing the command and
/// what it printed) unless it succeeded.
pub fn output_ok(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd` to its end: whether it succeeded, and its standard output followed by its
/// standard error.
pub fn merged_output(cmd: &mut std::process::Command) -> (bool, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `kubectl kustomize DIR`, which must succeed: the rendered YAML.
pub fn kustomize(dir: &Path) -> String {
    let out = output_ok(
        std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(dir),
    );
    String::from_utf8(out.stdout).expect("kustomize renders UTF-8")
}

/// Waits until `proc` logs the address it serves HTTP on (`http://127.0.0.1:PORT`) and returns
/// it; panics if the process exits before.
pub fn served_url(proc: &mut Proc, timeout: Duration) -> String {
    let what = format!("{}'s HTTP endpoint", proc.name);
    wait_for(timeout, &what, || {
        let text = proc.log_text();
        if let Some(at) = text.find("http://127.0.0.1:") {
            return Some(
                text[at..]
                    .chars()
                    .take_while(|c| !c.is_whitespace())
                    .collect(),
            );
        }
        assert!(
            proc.is_running(),
            "{} exited before serving HTTP:\n{text}",
            proc.name
        );
        None
    })
}

/// An embedded API server started as a child process on a free loopback port.
pub struct ApiServer {
    /// Base URL, e.g. `http://127.0.0.1:40123`.
    pub url: String,
    /// The admin kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    /// The process.
    pub proc: Proc,
}

/// Starts `volhealth apiserver --insecure-http --listen 127.0.0.1:0 --data-dir <dir>/data
/// --write-kubeconfig <dir>/kubeconfig EXTRA...` (plain HTTP: the tests using it are about other
/// things than TLS) and waits until the kubeconfig exists and `/readyz` answers. Unless EXTRA
/// names `--authorization-mode`, it runs `Node,AlwaysAllow`: the tests' clients have no roles,
/// and the server's default is `Node,RBAC`.
pub fn start_apiserver(dir: &Path, extra: &[&str]) -> ApiServer {
    let data = dir.join("data");
    let kubeconfig = dir.join("kubeconfig");
    let _ = std::fs::remove_file(&kubeconfig);
    let data_s = data.to_string_lossy().to_string();
    let kc_s = kubeconfig.to_string_lossy().to_string();
    let mut args = vec![
        "apiserver",
        "--insecure-http",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data_s,
        "--write-kubeconfig",
        &kc_s,
    ];
    if !extra.contains(&"--authorization-mode") {
        args.extend_from_slice(&["--authorization-mode", "Node,AlwaysAllow"]);
    }
    args.extend_from_slice(extra);
    let mut proc = volhealth("apiserver", dir, &args);
    let url = wait_for(
        Duration::from_secs(30),
        "the API server's kubeconfig",
        || {
            if !proc.is_running() {
                panic!(
                    "apiserver exited early; see {}",
                    dir.join("apiserver.log").display()
                );
            }
            let text = std::fs::read_to_string(&kubeconfig).ok()?;
            text.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("server:")
                    .map(|s| s.trim().trim_matches('"').to_string())
            })
        },
    );
    let ready = format!("{url}/readyz");
    wait_for(Duration::from_secs(30), "/readyz", || {
        http_get_ok(&ready).then_some(())
    });
    ApiServer {
        url,
        kubeconfig,
        proc,
    }
}

/// A value of the kubeconfig's cluster or user, base64-decoded when it is a `*-data` field.
fn kubeconfig_field(doc: &serde_json::Value, section: &str, field: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let key = if section == "clusters" {
        "cluster"
    } else {
        "user"
    };
    let v = doc[section][0][key][field].as_str()?;
    if field.ends_with("-data") {
        base64::engine::general_purpose::STANDARD.decode(v).ok()
    } else {
        Some(v.as_bytes().to_vec())
    }
}

/// One HTTP/1.0 request to the server of `kubeconfig` (first cluster and user) with its
/// credentials: over TLS trusting its CA with its client certificate and token when it is an
/// `https://` server. The body is sent as a merge patch. Returns (status, content type, body).
pub fn kube_request(
    kubeconfig: &Path,
    method: &str,
    path: &str,
    accept: Option<&str>,
    body: &str,
) -> Option<(u16, String, String)> {
    kube_request_as(
        kubeconfig,
        method,
        path,
        accept,
        "application/merge-patch+json",
        body,
    )
}

/// Like [`kube_request`], with the body's content type.
pub fn kube_request_as(
    kubeconfig: &Path,
    method: &str,
    path: &str,
    accept: Option<&str>,
    content_type: &str,
    body: &str,
) -> Option<(u16, String, String)> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
    use std::io::{Read, Write};
    use std::sync::Arc;
    let text = std::fs::read_to_string(kubeconfig).ok()?;
    let doc: serde_json::Value = serde_saphyr::from_str(&text).ok()?;
    let server = String::from_utf8(kubeconfig_field(&doc, "clusters", "server")?).ok()?;
    let (tls, host) = match server.strip_prefix("https://") {
        Some(h) => (true, h.trim_end_matches('/').to_string()),
        None => (
            false,
            server
                .strip_prefix("http://")?
                .trim_end_matches('/')
                .to_string(),
        ),
    };
    let token = kubeconfig_field(&doc, "users", "token")
        .map(|t| format!("Authorization: Bearer {}\r\n", String::from_utf8_lossy(&t)))
        .unwrap_or_default();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {host}\r\n{token}{accept}Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let tcp = std::net::TcpStream::connect(&host).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut raw = Vec::new();
    if tls {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        let ca = kubeconfig_field(&doc, "clusters", "certificate-authority-data")?;
        for cert in CertificateDer::pem_slice_iter(&ca) {
            roots.add(cert.ok()?).ok()?;
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .ok()?
            .with_root_certificates(roots);
        let config = match (
            kubeconfig_field(&doc, "users", "client-certificate-data"),
            kubeconfig_field(&doc, "users", "client-key-data"),
        ) {
            (Some(cert), Some(key)) => {
                let chain = CertificateDer::pem_slice_iter(&cert)
                    .collect::<Result<Vec<_>, _>>()
                    .ok()?;
                let key = PrivateKeyDer::from_pem_slice(&key).ok()?;
                builder.with_client_auth_cert(chain, key).ok()?
            }
            _ => builder.with_no_client_auth(),
        };
        let name = host
            .rsplit_once(':')?
            .0
            .trim_matches(['[', ']'])
            .to_string();
        let conn =
            rustls::ClientConnection::new(Arc::new(config), ServerName::try_from(name).ok()?)
                .ok()?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        stream.write_all(request.as_bytes()).ok()?;
        // A server that closes without close_notify still gave its whole answer to HTTP/1.0.
        let _ = stream.read_to_end(&mut raw);
    } else {
        let mut tcp = tcp;
        tcp.write_all(request.as_bytes()).ok()?;
        tcp.read_to_end(&mut raw).ok()?;
    }
    volhealth_testkit::parse_response(&String::from_utf8_lossy(&raw))
}

/// The flags an end-to-end sidecar run ends with: `interval_flag` at one second, a 5 s RPC
/// timeout and metrics on an ephemeral loopback port, then the test's `extra` flags.
pub fn quick_sidecar_flags<'a>(interval_flag: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        interval_flag,
        "1s",
        "--timeout",
        "5s",
        "--http-endpoint",
        "127.0.0.1:0",
    ];
    flags.extend_from_slice(extra);
    flags
}
