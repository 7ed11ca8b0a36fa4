//! hyper refuses a request head larger than its buffer (or a request line it cannot parse for
//! length) itself, with a bodyless 431 or 414, and a head it cannot parse at all (a control
//! character in a header value, say) with a bodyless 400, before any handler runs. This wraps a
//! connection and replaces those bodyless answers with the same `Status` body every other
//! refusal has.

use crate::errors::ApiError;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose bodyless 431/414/400 answers get a `Status` body.
pub(crate) struct StatusRefusals<I> {
    inner: I,
    pending: Vec<u8>,
}

impl<I> StatusRefusals<I> {
    /// Wraps a connection.
    pub(crate) fn new(inner: I) -> Self {
        StatusRefusals {
            inner,
            pending: Vec::new(),
        }
    }
}

/// The full answer replacing hyper's bodyless one, if `buf` is one.
fn replacement(buf: &[u8]) -> Option<Vec<u8>> {
    let head = buf.get(..buf.len().min(512))?;
    let text = std::str::from_utf8(head).ok()?;
    let bodyless = text
        .to_ascii_lowercase()
        .contains("\r\ncontent-length: 0\r\n");
    let (code, reason, phrase) = match text.get(8..13) {
        Some(" 431 ") => (
            431,
            "RequestHeaderFieldsTooLarge",
            "Request Header Fields Too Large",
        ),
        Some(" 414 ") => (414, "RequestURITooLong", "URI Too Long"),
        Some(" 400 ") => (400, "BadRequest", "Bad Request"),
        _ => return None,
    };
    if !text.starts_with("HTTP/1.") || !bodyless {
        return None;
    }
    let message = match code {
        431 => "the request head is larger than the server reads",
        414 => "the request URI is longer than the server reads",
        _ => "the request head is malformed (a request line or header that does not parse)",
    };
    let body = ApiError::new(code, reason, message)
        .status_json()
        .to_string();
    Some(
        format!(
            "HTTP/1.1 {code} {phrase}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<I: AsyncWrite + Unpin> StatusRefusals<I> {
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pending.drain(..n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for StatusRefusals<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for StatusRefusals<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_drain(cx))?;
        if let Some(answer) = replacement(buf) {
            self.pending = answer;
            // What is left is written by the flush or shutdown that follows.
            let _ = self.poll_drain(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bodyless_431_414_and_400_are_replaced() {
        let bare =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let answer = String::from_utf8(replacement(bare).unwrap()).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 ") && head.contains("application/json"));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (v["kind"].as_str(), v["code"].as_u64()),
            (Some("Status"), Some(431))
        );
        assert!(replacement(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\n").is_some());
        let bad = replacement(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").unwrap();
        assert!(
            String::from_utf8(bad)
                .unwrap()
                .contains("\"reason\":\"BadRequest\"")
        );
        // The handler's own answers carry a body: left alone.
        assert!(
            replacement(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 90\r\n\r\n{}"
            )
            .is_none()
        );
        assert!(replacement(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(replacement(b"{\"kind\":\"Status\"}").is_none());
    }
}
