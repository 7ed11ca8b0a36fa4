//! A flood of connections that never send a request cannot starve the server: with its
//! open-files limit at 1,024 (so 768 connection slots), 1,100 idle connections held by this
//! test (plain TCP that sends nothing, or TLS without a ClientHello) still leave a new client
//! served within 2 s, because the oldest idle connection is shed to make room. The server runs
//! in a child process under `prlimit --nofile=1024:1024`; this process keeps a high limit.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Idle connections the test holds: more than the server's 768 slots and its listen backlog
/// would hold for a client behind them.
const IDLE: usize = 1_100;
/// The server's open-files limit (soft and hard).
const SERVER_NOFILE: u64 = 1_024;
/// How soon a new client must be served while the idle connections are held. Well below the
/// server's first-request deadline (10 s), so that shedding, not the deadline, must serve it.
const SERVED_WITHIN: Duration = Duration::from_secs(2);

/// The server half, run by the tests below in a child process.
#[test]
#[ignore = "the server of the flood tests, run by them in a child process"]
fn flood_child_server() {
    support::child::serve_if_child();
}

/// How long opening the idle connections may take: below the server's first-request deadline
/// (10 s), so that none of them has timed out when the new client comes.
const FLOOD_WITHIN: Duration = Duration::from_secs(8);

/// Opens `n` connections to `addr` that send nothing, checking that the server lets them all
/// connect within [`FLOOD_WITHIN`] (a server that stops accepting leaves connects hanging once
/// its listen backlog is full).
fn hold_idle(addr: &str, n: usize) -> Vec<TcpStream> {
    let started = Instant::now();
    let held: Vec<TcpStream> = (0..n)
        .map(|i| TcpStream::connect(addr).unwrap_or_else(|e| panic!("idle connection {i}: {e}")))
        .collect();
    let took = started.elapsed();
    eprintln!("{n} idle connections open after {took:?}");
    assert!(
        took < FLOOD_WITHIN,
        "opening {n} idle connections took {took:?}: the server stopped accepting"
    );
    held
}

/// Starts the child server with the low limit, or None (skipped) without `prlimit`.
fn flooded_server(dir: &std::path::Path, tls: bool) -> Option<support::child::Child> {
    if !support::have_tool("prlimit", &["--version"]) {
        return None;
    }
    // This process holds the idle connections: it needs more descriptors than the server.
    let limit = volhealth_daemon::fd_limit::raise_to_hard();
    assert!(
        limit.is_none_or(|l| l > (IDLE as u64) + 256),
        "the test needs an open-files limit above {} (it is {limit:?})",
        IDLE + 256
    );
    Some(support::child::start(
        "flood_child_server",
        dir,
        tls,
        Some(SERVER_NOFILE),
    ))
}

#[test]
fn a_plain_client_is_served_while_idle_connections_flood_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = flooded_server(dir.path(), false) else {
        return;
    };
    let addr = server.url.strip_prefix("http://").unwrap().to_string();
    let idle = hold_idle(&addr, IDLE);
    let started = Instant::now();
    let mut client = TcpStream::connect(&addr).unwrap();
    client
        .write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let answer = support::read_to_close(&mut client, SERVED_WITHIN * 5);
    let took = started.elapsed();
    let answer = answer.expect("the client is answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        took < SERVED_WITHIN,
        "served after {took:?} with {IDLE} idle connections held"
    );
    drop(idle);
}

/// A GET of /version over TLS (HTTP/1.1) trusting `ca_pem`; the answer's status line.
async fn tls_get_version(addr: &str, ca_pem: &str) -> std::io::Result<String> {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from("127.0.0.1".to_string()).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    tls.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    // A peer that closes without close_notify ends the read with an error after the answer.
    let _ = tls.read_to_end(&mut answer).await;
    Ok(String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_is_served_while_connections_without_a_client_hello_flood_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = flooded_server(dir.path(), true) else {
        return;
    };
    let addr = server.url.strip_prefix("https://").unwrap().to_string();
    let ca = std::fs::read_to_string(dir.path().join("data/pki/ca.crt")).unwrap();
    let held = addr.clone();
    let idle = tokio::task::spawn_blocking(move || hold_idle(&held, IDLE))
        .await
        .unwrap();
    let started = Instant::now();
    let status = tokio::time::timeout(SERVED_WITHIN * 5, tls_get_version(&addr, &ca))
        .await
        .expect("the client is answered within the test's patience")
        .expect("a TLS exchange");
    let took = started.elapsed();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        took < SERVED_WITHIN,
        "served after {took:?} with {IDLE} connections without a ClientHello held"
    );
    drop(idle);
}
