//! Shared helpers for the API server's own end-to-end tests: the server runs in this process,
//! on its own thread and runtime, on `127.0.0.1:0` over a temporary data directory; tests talk
//! to it over real HTTP. Waits are on conditions with deadlines, never fixed sleeps.
#![allow(dead_code)]

pub mod child;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use volhealth_apiserver::authz::{Authorizer, Tokens};
use volhealth_apiserver::{FeatureGates, ServerConfig, TlsConfig};

/// The authorizer chain of servers started without `--authorization-mode`: most tests speak as
/// `system:anonymous` or as tokens without any roles, and are about other things than RBAC;
/// node scoping stays on.
pub const TESTS_AUTHORIZATION_MODE: &str = "Node,AlwaysAllow";

/// A running in-process API server; dropping it shuts it down.
pub struct ApiServer {
    /// Base URL, e.g. `http://127.0.0.1:40123` (`https://` over TLS).
    pub url: String,
    /// The admin kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How long a stopping server may take to finish open requests before its runtime is dropped.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A `ServerConfig` from the `volhealth apiserver` flags the tests use (`--feature-gates`,
/// `--token-auth-file`, `--anonymous-admin`, `--authorization-mode`, `--retained-changes`,
/// `--bookmark-interval-seconds`, and the TLS ones: `--tls-san`, `--client-ca-file`,
/// `--tls-cert-file`, `--tls-private-key-file`), so a test reads the same as the command line it
/// stands for. It serves plain HTTP (as with `--insecure-http`) unless a TLS flag is given or
/// [`start_tls_apiserver`] starts it. Without `--authorization-mode` it runs
/// [`TESTS_AUTHORIZATION_MODE`], not the server's default `Node,RBAC`.
pub fn config_from_flags(dir: &Path, flags: &[&str]) -> ServerConfig {
    let mut config = ServerConfig::new(dir.join("data"));
    config.write_kubeconfig = Some(dir.join("kubeconfig"));
    config.authorization =
        Authorizer::parse(TESTS_AUTHORIZATION_MODE).expect("the tests' authorization mode");
    let mut anonymous_admin = false;
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        let mut value = || *it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match *flag {
            "--feature-gates" => {
                let v = value();
                config.gates = FeatureGates::parse(v).unwrap_or_else(|e| panic!("{v}: {e}"));
            }
            "--token-auth-file" => {
                let v = value();
                config.tokens =
                    Some(Tokens::load(Path::new(v)).unwrap_or_else(|e| panic!("{v}: {e}")));
            }
            "--anonymous-admin" => anonymous_admin = true,
            "--authorization-mode" => {
                let v = value();
                config.authorization = Authorizer::parse(v).unwrap_or_else(|e| panic!("{v}: {e}"));
            }
            "--tls-san" => {
                let v = value().to_string();
                config
                    .tls
                    .get_or_insert_with(TlsConfig::default)
                    .sans
                    .push(v);
            }
            "--client-ca-file" => {
                config
                    .tls
                    .get_or_insert_with(TlsConfig::default)
                    .client_ca_file = Some(PathBuf::from(value()));
            }
            "--tls-cert-file" => {
                config.tls.get_or_insert_with(TlsConfig::default).cert_file =
                    Some(PathBuf::from(value()));
            }
            "--tls-private-key-file" => {
                config.tls.get_or_insert_with(TlsConfig::default).key_file =
                    Some(PathBuf::from(value()));
            }
            "--retained-changes" => config.retained_changes = value().parse().expect("a count"),
            "--bookmark-interval-seconds" => {
                config.bookmark_interval =
                    Duration::from_secs(value().parse::<u64>().expect("seconds").max(1))
            }
            other => panic!("flag {other} is not supported by the in-process server"),
        }
    }
    if anonymous_admin {
        config.tokens = config.tokens.map(Tokens::with_anonymous_admin);
    }
    config
}

/// Starts the server with the given `volhealth apiserver` flags, data in `<dir>/data` and the
/// kubeconfig at `<dir>/kubeconfig`, and waits until `/readyz` answers.
pub fn start_apiserver(dir: &Path, flags: &[&str]) -> ApiServer {
    start_with_config(config_from_flags(dir, flags))
}

/// Starts the server over TLS (certificates made in `<dir>/data/pki`, as `volhealth apiserver`
/// does without `--insecure-http`) with the given flags, and waits until it listens.
pub fn start_tls_apiserver(dir: &Path, flags: &[&str]) -> ApiServer {
    let mut config = config_from_flags(dir, flags);
    config.tls.get_or_insert_with(TlsConfig::default);
    start_with_config(config)
}

/// Starts the server with `config` (its kubeconfig must be set) and waits until `/readyz`
/// answers (over TLS: until the kubeconfig is written, which happens once it listens).
pub fn start_with_config(config: ServerConfig) -> ApiServer {
    let kubeconfig = config
        .write_kubeconfig
        .clone()
        .expect("the tests read the kubeconfig");
    let _ = std::fs::remove_file(&kubeconfig);
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("server runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind 127.0.0.1:0");
            let _ = addr_tx.send(listener.local_addr().expect("local addr"));
            let (grace_tx, grace_rx) = tokio::sync::oneshot::channel::<()>();
            let shutdown = async move {
                let _ = stopped.await;
                let _ = grace_tx.send(());
            };
            let served = volhealth_apiserver::serve(listener, config, shutdown);
            let forced = async move {
                let _ = grace_rx.await;
                tokio::time::sleep(STOP_GRACE).await;
            };
            tokio::select! {
                r = served => if let Err(e) = r { eprintln!("the API server failed: {e}") },
                _ = forced => eprintln!("the API server did not stop within {STOP_GRACE:?}"),
            }
        });
        rt.shutdown_timeout(STOP_GRACE);
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the server thread binds a port");
    let url = format!("{scheme}://{addr}");
    let server = ApiServer {
        url: url.clone(),
        kubeconfig: kubeconfig.clone(),
        stop: Some(stop),
        thread: Some(thread),
    };
    let ready = format!("{url}/readyz");
    wait_for(
        Duration::from_secs(30),
        "/readyz and the kubeconfig",
        || (kubeconfig.exists() && (scheme == "https" || http_get_ok(&ready))).then_some(()),
    );
    server
}

impl ApiServer {
    /// Shuts the server down and waits until it has let go of its data directory.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Polls `check` until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

/// Async version of [`wait_for`].
pub async fn wait_for_async<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether an outside tool is present. When it is missing the test should return early after
/// this prints why; under `VOLHEALTH_REQUIRE_TOOLS=1` a missing tool fails the test instead.
pub fn have_tool(tool: &str, probe: &[&str]) -> bool {
    let ok = Command::new(tool)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("VOLHEALTH_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!(
                "{tool} is required (VOLHEALTH_REQUIRE_TOOLS=1) but `{tool} {}` failed",
                probe.join(" ")
            );
        }
        eprintln!(
            "SKIPPED: {tool} is not available (`{tool} {}` failed)",
            probe.join(" ")
        );
    }
    ok
}

/// A plain-HTTP GET on loopback that reports whether the answer was 200.
pub fn http_get_ok(url: &str) -> bool {
    use std::io::{Read, Write};
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let Ok(mut s) = std::net::TcpStream::connect(host) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.1 200")
}

/// Reads until the server closes the connection; None if it keeps it open for `limit`.
pub fn read_to_close(s: &mut std::net::TcpStream, limit: Duration) -> Option<String> {
    s.set_read_timeout(Some(limit)).expect("read timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match std::io::Read::read(s, &mut buf) {
            Ok(0) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(String::from_utf8_lossy(&got).into_owned());
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None;
            }
            Err(e) => panic!("reading: {e}"),
        }
    }
}

/// Sends a PATCH with `content_type` and `body`; answers the status code, every `Warning`
/// header, and the JSON body (null when there is none).
pub async fn patch_raw(
    url: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Vec<String>, serde_json::Value) {
    let r = reqwest::Client::new()
        .patch(url)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    let warnings = r
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    (code, warnings, r.json().await.unwrap_or_default())
}

/// One request to `server` as `token` with extra `headers` (impersonation and the like) and a
/// body sent as `content_type`; answers the status code and the JSON body (null when none).
pub async fn request_with_headers(
    server: &ApiServer,
    token: &str,
    headers: &[(&str, &str)],
    method: &str,
    path: &str,
    body: Option<(&str, &serde_json::Value)>,
) -> (u16, serde_json::Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut rb = reqwest::Client::new()
        .request(method, format!("{}{path}", server.url))
        .bearer_auth(token);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    if let Some((content_type, b)) = body {
        rb = rb.header("content-type", content_type).body(b.to_string());
    }
    let resp = rb.send().await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(serde_json::Value::Null))
}
