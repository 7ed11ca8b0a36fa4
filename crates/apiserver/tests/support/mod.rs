//! Shared helpers for the API server's own end-to-end tests: the server runs in this process
//! (started by `volhealth_testkit`), on its own thread and runtime, on `127.0.0.1:0` over a
//! temporary data directory; tests talk to it over real HTTP. Waits are on conditions with
//! deadlines, never fixed sleeps.
#![allow(dead_code)]

pub mod child;

use std::time::Duration;

// The one in-process server, wait and tool probe of every crate's tests.
#[allow(unused_imports)]
pub use volhealth_testkit::{
    ApiServer, TESTS_AUTHORIZATION_MODE, client_for, config_from_flags, have_tool, http_get_ok,
    kubectl, python_with_kubernetes_client, run_python_ok, start_apiserver,
    start_apiserver_with_tokens, start_tls_apiserver, start_with_config, token_flags,
    wait_for as wait_for_async, wait_for_blocking as wait_for, write_token_file,
};

/// A new connection to `server`.
pub fn connect(server: &ApiServer) -> std::net::TcpStream {
    let addr = server.url.strip_prefix("http://").expect("http URL");
    std::net::TcpStream::connect(addr).expect("connect")
}

/// Sends `request` as is, without a client library tidying it, on a new connection to
/// `server`; answers what the server sent before it closed the connection.
pub fn send_as_is(server: &ApiServer, request: &str) -> String {
    let mut s = connect(server);
    std::io::Write::write_all(&mut s, request.as_bytes()).expect("write");
    read_to_close(&mut s, Duration::from_secs(20)).expect("the server closes the connection")
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
