//! Accepting the `:authority` that gRPC C-core, grpc-java and grpc-swift send on unix sockets.
//!
//! Those clients send the socket path (often percent-encoded) as `:authority`. The HTTP/2 server
//! under tonic refuses any value that is not a valid URI authority and resets the stream with
//! PROTOCOL_ERROR, and offers no option to relax that check. A unix socket has no authority to
//! route by, so nothing is lost by replacing such a value with `localhost`, which is what grpc-go
//! (the kubelet, the CSI sidecars) sends.
//!
//! [`AuthorityFix`] wraps an accepted connection and does that on the bytes the client sends:
//! it passes every frame through unchanged except header blocks, which it decodes (HPACK),
//! rewrites when the authority is not acceptable, and re-encodes with literal fields that never
//! enter the dynamic table, so the server's HPACK state only ever depends on what it receives.
//! Bytes the server writes are not touched.
//!
//! The first header block of a connection decides whether it needs this at all. A gRPC channel
//! sends one authority for all its calls, so when the first request's authority is acceptable
//! (grpc-go, tonic: the kubelet, the sidecars), that block and everything after it pass through
//! untouched and undecoded: decoding costs a Huffman table per string, which at thousands of
//! calls a second was a third of a driver's CPU. A later request on such a connection with an
//! authority the server refuses gets the server's own answer (its stream reset), exactly as
//! without this wrapper.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

mod rewriter;
mod wire;

use rewriter::Rewriter;

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 8192;

/// An accepted connection whose client-sent HTTP/2 header blocks get an acceptable `:authority`.
#[derive(Debug)]
pub(crate) struct AuthorityFix<S> {
    inner: S,
    rewriter: Rewriter,
    out: Vec<u8>,
    out_pos: usize,
    eof: bool,
    chunk: Box<[u8]>,
}

impl<S> AuthorityFix<S> {
    /// Wraps a freshly accepted connection (nothing read from it yet).
    pub(crate) fn new(inner: S) -> Self {
        AuthorityFix {
            inner,
            rewriter: Rewriter::new(),
            out: Vec::new(),
            out_pos: 0,
            eof: false,
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_pos);
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let filled = read.filled();
            if filled.is_empty() {
                this.eof = true;
                this.rewriter.finish(&mut this.out);
            } else {
                this.rewriter
                    .feed(filled, &mut this.out)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<S: Connected> Connected for AuthorityFix<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}
