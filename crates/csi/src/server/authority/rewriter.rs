//! The byte-stream transformation behind [`super::AuthorityFix`], without any I/O: frames pass
//! as they are, header blocks are decoded and, where the authority needs it, re-encoded.

use super::wire::{encode_literal, write_frame};
use tonic::codegen::http::uri::Authority;

/// The HTTP/2 client connection preface (RFC 9113 section 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame header length.
const FRAME_HEADER: usize = 9;
/// Frame types this rewriter looks into.
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
/// Frame flags.
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// Largest frame payload written: the smallest SETTINGS_MAX_FRAME_SIZE a peer may set.
const MAX_FRAME: usize = 16_384;
/// Largest header block accepted, summed over its CONTINUATION frames.
const MAX_BLOCK: usize = 1 << 20;
/// HPACK dynamic table size the server advertises (the protocol default; tonic keeps it).
const TABLE_SIZE: usize = 4096;
/// What replaces an authority the server would refuse.
const REPLACEMENT: &[u8] = b"localhost";

/// Where the client's byte stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the end of the connection preface.
    Preface,
    /// Reading frames.
    Frames,
    /// Not HTTP/2 with prior knowledge, or the first request's authority was acceptable: bytes
    /// pass unchanged, the server decides.
    Passthrough,
}

/// A HEADERS frame waiting for its CONTINUATION frames.
#[derive(Debug)]
struct Pending {
    stream_id: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    block: Vec<u8>,
}

/// The byte-stream transformation behind [`AuthorityFix`], without any I/O.
pub(super) struct Rewriter {
    phase: Phase,
    buf: Vec<u8>,
    pending: Option<Pending>,
    decoder: loona_hpack::Decoder<'static>,
    /// Whether a header block has been rewritten, after which every block is re-encoded.
    rewrote: bool,
}

impl std::fmt::Debug for Rewriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values (tokens, for one) are never printed.
        f.debug_struct("Rewriter")
            .field("phase", &self.phase)
            .field("buffered", &self.buf.len())
            .finish_non_exhaustive()
    }
}

/// Why a client's byte stream could not be rewritten; the connection is closed.
#[derive(Debug, thiserror::Error)]
pub(super) enum RewriteError {
    /// A header block did not decode.
    #[error("decoding an HTTP/2 header block from the client: {0}")]
    Hpack(String),
    /// Frames arrived out of the order HTTP/2 requires.
    #[error("reading HTTP/2 frames from the client: {0}")]
    Framing(&'static str),
}

impl Rewriter {
    /// A rewriter for a new connection.
    pub(crate) fn new() -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(TABLE_SIZE);
        Rewriter {
            phase: Phase::Preface,
            buf: Vec::new(),
            pending: None,
            decoder,
            rewrote: false,
        }
    }

    /// Takes the next bytes from the client and appends what the server should read to `out`.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), RewriteError> {
        if self.phase == Phase::Passthrough {
            out.extend_from_slice(input);
            return Ok(());
        }
        self.buf.extend_from_slice(input);
        if self.phase == Phase::Preface {
            let n = self.buf.len().min(PREFACE.len());
            if self.buf[..n] != PREFACE[..n] {
                self.phase = Phase::Passthrough;
                out.append(&mut self.buf);
                return Ok(());
            }
            if n < PREFACE.len() {
                return Ok(());
            }
            out.extend_from_slice(PREFACE);
            self.buf.drain(..PREFACE.len());
            self.phase = Phase::Frames;
        }
        let mut start = 0;
        while self.buf.len() - start >= FRAME_HEADER {
            let head = &self.buf[start..start + FRAME_HEADER];
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let end = start + FRAME_HEADER + len;
            if self.buf.len() < end {
                break;
            }
            let frame = std::mem::take(&mut self.buf);
            let result = self.frame(&frame[start..end], out);
            self.buf = frame;
            result?;
            start = end;
            if self.phase == Phase::Passthrough {
                out.extend_from_slice(&self.buf[start..]);
                self.buf.clear();
                return Ok(());
            }
        }
        self.buf.drain(..start);
        Ok(())
    }

    /// The client closed its side: whatever is left goes to the server as it is.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.buf);
    }

    /// Handles one complete frame.
    fn frame(&mut self, frame: &[u8], out: &mut Vec<u8>) -> Result<(), RewriteError> {
        let (kind, flags) = (frame[3], frame[4]);
        let stream_id = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
        let payload = &frame[FRAME_HEADER..];
        match (kind, self.pending.as_mut()) {
            (HEADERS, None) => {
                let mut body = payload;
                if flags & PADDED != 0 {
                    let (&pad, rest) = body
                        .split_first()
                        .ok_or(RewriteError::Framing("HEADERS frame too short"))?;
                    body = rest
                        .get(..rest.len().saturating_sub(usize::from(pad)))
                        .filter(|_| usize::from(pad) <= rest.len())
                        .ok_or(RewriteError::Framing("HEADERS padding too long"))?;
                }
                let mut priority = None;
                if flags & PRIORITY != 0 {
                    let (p, rest) = body
                        .split_at_checked(5)
                        .ok_or(RewriteError::Framing("HEADERS frame too short"))?;
                    priority = Some([p[0], p[1], p[2], p[3], p[4]]);
                    body = rest;
                }
                let pending = Pending {
                    stream_id,
                    end_stream: flags & END_STREAM != 0,
                    priority,
                    block: body.to_vec(),
                };
                if flags & END_HEADERS != 0 {
                    self.emit(pending, out)
                } else {
                    self.pending = Some(pending);
                    Ok(())
                }
            }
            (CONTINUATION, Some(pending)) if pending.stream_id == stream_id => {
                if pending.block.len() + payload.len() > MAX_BLOCK {
                    return Err(RewriteError::Framing("header block larger than 1 MiB"));
                }
                pending.block.extend_from_slice(payload);
                if flags & END_HEADERS != 0 {
                    let pending = self.pending.take().ok_or(RewriteError::Framing(
                        "CONTINUATION without a HEADERS frame",
                    ))?;
                    self.emit(pending, out)
                } else {
                    Ok(())
                }
            }
            (_, Some(_)) => Err(RewriteError::Framing(
                "a header block was interrupted by another frame",
            )),
            _ => {
                out.extend_from_slice(frame);
                Ok(())
            }
        }
    }

    /// Decodes a complete header block, fixes its authority and writes it as frames.
    fn emit(&mut self, pending: Pending, out: &mut Vec<u8>) -> Result<(), RewriteError> {
        let mut fields = self
            .decoder
            .decode(&pending.block)
            .map_err(|e| RewriteError::Hpack(e.to_string()))?;
        let mut changed = false;
        for (name, value) in &mut fields {
            if name.as_slice() == b":authority" && !acceptable_authority(value) {
                *value = REPLACEMENT.to_vec();
                changed = true;
            }
        }
        if !changed && !self.rewrote {
            // Nothing rewritten on this connection yet, so the server's HPACK state is the
            // client's: this block goes as the client encoded it, and so does all that follows.
            write_block(&pending, &pending.block, out);
            self.phase = Phase::Passthrough;
            return Ok(());
        }
        self.rewrote = true;
        let mut block = Vec::with_capacity(pending.block.len() * 2);
        for (name, value) in &fields {
            encode_literal(name, value, &mut block);
        }
        write_block(&pending, &block, out);
        Ok(())
    }
}

/// Writes a header block as a HEADERS frame and as many CONTINUATION frames as it needs.
fn write_block(pending: &Pending, block: &[u8], out: &mut Vec<u8>) {
    let mut first = Vec::with_capacity(5 + block.len().min(MAX_FRAME));
    let mut flags = 0;
    if pending.end_stream {
        flags |= END_STREAM;
    }
    if let Some(p) = pending.priority {
        flags |= PRIORITY;
        first.extend_from_slice(&p);
    }
    let room = MAX_FRAME - first.len();
    let (head, mut rest) = block.split_at(block.len().min(room));
    first.extend_from_slice(head);
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    write_frame(HEADERS, flags, pending.stream_id, &first, out);
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(rest.len().min(MAX_FRAME));
        let flags = if tail.is_empty() { END_HEADERS } else { 0 };
        write_frame(CONTINUATION, flags, pending.stream_id, chunk, out);
        rest = tail;
    }
}

/// Whether the HTTP/2 server would take `value` as an `:authority`.
fn acceptable_authority(value: &[u8]) -> bool {
    !value.is_empty() && Authority::try_from(value).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Client-side HPACK encoding with the dynamic table, as real clients do.
    fn block(encoder: &mut loona_hpack::Encoder<'_>, fields: &[(&[u8], &[u8])]) -> Vec<u8> {
        encoder.encode(fields.iter().map(|&(n, v)| (n, v)))
    }

    fn request(authority: &[u8]) -> Vec<(&'static [u8], Vec<u8>)> {
        vec![
            (b":method", b"POST".to_vec()),
            (b":scheme", b"http".to_vec()),
            (b":path", b"/csi.v1.Identity/GetPluginInfo".to_vec()),
            (b":authority", authority.to_vec()),
            (b"content-type", b"application/grpc".to_vec()),
        ]
    }

    /// What a client writes: the preface, SETTINGS, then for each `(stream, authority)` a request's
    /// header block (HPACK with the dynamic table, one encoder for the connection) and its body.
    fn client_stream(requests: &[(u32, &[u8])]) -> Vec<u8> {
        let mut enc = loona_hpack::Encoder::new();
        let mut input = PREFACE.to_vec();
        write_frame(0x4, 0, 0, &[], &mut input);
        for &(id, authority) in requests {
            let fields = request(authority);
            let refs: Vec<(&[u8], &[u8])> = fields.iter().map(|(n, v)| (*n, &v[..])).collect();
            let b = block(&mut enc, &refs);
            write_frame(HEADERS, END_HEADERS, id, &b, &mut input);
            write_frame(0x0, END_STREAM, id, b"\0\0\0\0\0", &mut input);
        }
        input
    }

    /// Decoded header fields.
    type Fields = Vec<(Vec<u8>, Vec<u8>)>;
    /// A frame read back: type, flags, stream id, decoded fields (on END_HEADERS), payload.
    type Frame = (u8, u8, u32, Fields, Vec<u8>);

    /// Splits the rewriter's output into frames (after the preface) and decodes header blocks.
    fn read_back(bytes: &[u8]) -> Vec<Frame> {
        assert!(bytes.starts_with(PREFACE));
        let mut rest = &bytes[PREFACE.len()..];
        let mut decoder = loona_hpack::Decoder::new();
        let mut frames = Vec::new();
        let mut block = Vec::new();
        while !rest.is_empty() {
            let len = (rest[0] as usize) << 16 | (rest[1] as usize) << 8 | rest[2] as usize;
            let (kind, flags) = (rest[3], rest[4]);
            let id = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]);
            let payload = rest[9..9 + len].to_vec();
            rest = &rest[9 + len..];
            if kind == HEADERS || kind == CONTINUATION {
                let body = if kind == HEADERS && flags & PRIORITY != 0 {
                    &payload[5..]
                } else {
                    &payload[..]
                };
                block.extend_from_slice(body);
                if flags & END_HEADERS != 0 {
                    let fields = decoder.decode(&block).expect("decode rewritten block");
                    block.clear();
                    frames.push((kind, flags, id, fields, payload));
                    continue;
                }
            }
            frames.push((kind, flags, id, Vec::new(), payload));
        }
        frames
    }

    fn authority_of(fields: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        fields
            .iter()
            .find(|(n, _)| n == b":authority")
            .map(|(_, v)| v.clone())
            .expect(":authority present")
    }

    #[test]
    fn socket_path_authorities_become_localhost_and_good_ones_stay() {
        // Requests whose authorities go through the dynamic table.
        let input = client_stream(&[
            (1, b"%2Frun%2Fcsi%2Fcsi.sock"),
            (3, b"/run/csi/csi.sock"),
            (5, b"localhost:50051"),
            (7, b"%2Frun%2Fcsi%2Fcsi.sock"),
        ]);
        // Fed one byte at a time, so every frame boundary is crossed mid-read.
        let mut rw = Rewriter::new();
        let mut out = Vec::new();
        for b in &input {
            rw.feed(std::slice::from_ref(b), &mut out).expect("feed");
        }
        let frames = read_back(&out);
        let authorities: Vec<Vec<u8>> = frames
            .iter()
            .filter(|f| f.0 == HEADERS)
            .map(|f| authority_of(&f.3))
            .collect();
        assert_eq!(
            authorities,
            vec![
                b"localhost".to_vec(),
                b"localhost".to_vec(),
                b"localhost:50051".to_vec(),
                b"localhost".to_vec()
            ]
        );
        let data: Vec<_> = frames.iter().filter(|f| f.0 == 0x0).collect();
        assert_eq!(data.len(), 4);
        assert!(
            data.iter()
                .all(|f| f.1 == END_STREAM && f.4 == b"\0\0\0\0\0")
        );
        let headers = frames.iter().find(|f| f.0 == HEADERS).expect("headers");
        assert_eq!(headers.3[0], (b":method".to_vec(), b"POST".to_vec()));
    }

    #[test]
    fn a_connection_whose_first_authority_is_acceptable_passes_through_untouched() {
        // grpc-go's and tonic's authority first; a later refusable one is the server's to answer.
        let input = client_stream(&[
            (1, b"localhost"),
            (3, b"localhost"),
            (5, b"/run/csi/csi.sock"),
        ]);
        for chunk in [1, 7, input.len()] {
            let mut rw = Rewriter::new();
            let mut out = Vec::new();
            for piece in input.chunks(chunk) {
                rw.feed(piece, &mut out).expect("feed");
            }
            assert_eq!(
                out, input,
                "fed {chunk} bytes at a time: byte for byte the same"
            );
            assert_eq!(rw.phase, Phase::Passthrough);
        }
        let authorities: Vec<Vec<u8>> = read_back(&input)
            .iter()
            .filter(|f| f.0 == HEADERS)
            .map(|f| authority_of(&f.3))
            .collect();
        assert_eq!(authorities[2], b"/run/csi/csi.sock", "not rewritten");
    }

    #[test]
    fn continuation_padding_and_priority_are_handled() {
        let mut enc = loona_hpack::Encoder::new();
        let big = vec![b'x'; 20_000];
        let mut fields = request(b"/tmp/csi.sock");
        fields.push((b"x-big", big.clone()));
        let refs: Vec<(&[u8], &[u8])> = fields.iter().map(|(n, v)| (*n, &v[..])).collect();
        let b = block(&mut enc, &refs);
        let (first, second) = b.split_at(100);
        let mut payload = vec![3u8]; // pad length
        payload.extend_from_slice(&[0, 0, 0, 0, 16]); // priority
        payload.extend_from_slice(first);
        payload.extend_from_slice(&[0, 0, 0]);
        let mut input = PREFACE.to_vec();
        write_frame(
            HEADERS,
            PADDED | PRIORITY | END_STREAM,
            1,
            &payload,
            &mut input,
        );
        write_frame(CONTINUATION, END_HEADERS, 1, second, &mut input);
        let mut rw = Rewriter::new();
        let mut out = Vec::new();
        rw.feed(&input, &mut out).expect("feed");
        let frames = read_back(&out);
        assert_eq!(frames[0].0, HEADERS);
        assert_eq!(frames[0].1 & (END_STREAM | PRIORITY), END_STREAM | PRIORITY);
        assert_eq!(&frames[0].4[..5], &[0, 0, 0, 0, 16]);
        assert!(frames.iter().all(|f| f.4.len() <= MAX_FRAME));
        let last = frames.last().expect("frames");
        assert_eq!(last.0, CONTINUATION);
        assert_eq!(authority_of(&last.3), b"localhost");
        assert!(last.3.contains(&(b"x-big".to_vec(), big)));
    }

    #[test]
    fn non_http2_bytes_pass_unchanged() {
        let mut rw = Rewriter::new();
        let mut out = Vec::new();
        rw.feed(b"GET / HTTP/1.1\r\n", &mut out).expect("feed");
        rw.feed(b"Host: x\r\n\r\n", &mut out).expect("feed");
        assert_eq!(out, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    }

    #[test]
    fn an_interrupted_header_block_is_an_error() {
        let mut input = PREFACE.to_vec();
        write_frame(HEADERS, 0, 1, &[0x82], &mut input);
        write_frame(0x0, 0, 1, b"x", &mut input);
        let err = Rewriter::new()
            .feed(&input, &mut Vec::new())
            .expect_err("interrupted block");
        assert!(err.to_string().contains("interrupted"), "{err}");
    }
}
