//! Shared helpers for the end-to-end tests: they start the real `volhealth` binary as child
//! processes and wait on conditions with deadlines (never fixed sleeps).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// A child process that is killed (and reaped) when dropped, so a failing test leaves nothing behind.
pub struct Proc {
    /// What this process is, for failure messages.
    pub name: String,
    /// The running child.
    pub child: Child,
    /// Where its output goes.
    pub log: PathBuf,
}

impl Proc {
    /// Starts `volhealth ARGS...` with stdout and stderr appended to `<log_dir>/<name>.log`.
    pub fn start(name: &str, log_dir: &Path, args: &[&str]) -> Proc {
        Self::start_with_env(name, log_dir, args, &[])
    }

    /// Like [`Proc::start`], with extra environment variables.
    pub fn start_with_env(name: &str, log_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Proc {
        Self::start_in(name, log_dir, None, args, env)
    }

    /// Like [`Proc::start_with_env`], in the working directory `cwd` when one is given.
    pub fn start_in(
        name: &str,
        log_dir: &Path,
        cwd: Option<&Path>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        std::fs::create_dir_all(log_dir).expect("create log dir");
        let log_path = log_dir.join(format!("{name}.log"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("open log");
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log"))
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc {
            name: name.to_string(),
            child,
            log: log_path,
        }
    }

    /// Sends SIGKILL and waits for the process to end.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// Lines of a component's log that a failing test prints.
const LOG_TAIL_LINES: usize = 60;

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
        // A test that fails mid-way removes its directory with the logs in it; print what each
        // component said last, so a failure on a CI machine can be read without rerunning it.
        if std::thread::panicking() {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
            eprintln!(
                "--- last {} lines of {} ({}) ---\n{}\n--- end of {} ---",
                tail.len(),
                self.name,
                self.log.display(),
                tail.join("\n"),
                self.name
            );
        }
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

/// Runs `f` to completion on a runtime of its own, for a test without one that calls async code.
pub fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
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
    let mut proc = Proc::start("apiserver", dir, &args);
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

/// Runs `promtool check metrics` on a metrics page: `Err` holds promtool's complaints.
/// Callers check [`have_tool`]`("promtool", &["--version"])` first.
pub fn promtool_check_metrics(page: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    child
        .stdin
        .take()
        .expect("promtool stdin")
        .write_all(page.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool output");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A plain-HTTP GET on loopback with an `Accept` header: (status, content type, body).
pub fn http_get(url: &str, accept: Option<&str>) -> Option<(u16, String, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut s = std::net::TcpStream::connect(host).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{accept}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let raw = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, content_type, body))
}

/// The payload of a chunked HTTP/1.1 body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
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
    let raw = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    Some((status, content_type, body.to_string()))
}
