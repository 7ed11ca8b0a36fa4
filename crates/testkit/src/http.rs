//! Plain HTTP/1.1 on loopback without a client library, for tests that read a component's
//! `/readyz` or `/metrics` the way a probe or a scraper does.

use std::io::{Read, Write};
use std::time::Duration;

/// Splits `http://HOST/PATH` into its host and path (`/` when it has none).
fn host_and_path(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("http://")?;
    Some(match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    })
}

/// A plain-HTTP GET on loopback that reports whether the answer was 200.
pub fn http_get_ok(url: &str) -> bool {
    let Some((host, path)) = host_and_path(url) else {
        return false;
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

/// A plain-HTTP GET on loopback with an `Accept` header: (status, content type, body).
pub fn http_get(url: &str, accept: Option<&str>) -> Option<(u16, String, String)> {
    let (host, path) = host_and_path(url)?;
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
    let (status, content_type, body) = parse_response(&raw)?;
    let chunked = raw
        .split_once("\r\n\r\n")?
        .0
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked { dechunk(&body) } else { body };
    Some((status, content_type, body))
}

/// The status, content type and body of a raw HTTP answer.
pub fn parse_response(raw: &str) -> Option<(u16, String, String)> {
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

/// `s` as a Secret's `data` carries it: base64, as the Kubernetes types encode bytes.
pub fn b64(s: &str) -> String {
    serde_json::to_value(k8s_openapi::ByteString(s.as_bytes().to_vec()))
        .expect("bytes as JSON")
        .as_str()
        .expect("a JSON string")
        .to_string()
}
