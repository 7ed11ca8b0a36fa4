//! The bytes the rewriter writes: HTTP/2 frames, and HPACK literals that never enter the
//! server's dynamic table (RFC 9113 section 4.1, RFC 7541 sections 5 and 6.2.3).

/// Appends an HPACK "literal header field never indexed, new name" (RFC 7541 section 6.2.3).
pub(super) fn encode_literal(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.push(0x10);
    encode_string(name, out);
    encode_string(value, out);
}

/// Appends an HPACK string literal without Huffman coding.
pub(super) fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    encode_integer(s.len(), 7, 0, out);
    out.extend_from_slice(s);
}

/// Appends an HPACK integer with an `prefix_bits`-bit prefix, `high` holding the other bits.
pub(super) fn encode_integer(mut value: usize, prefix_bits: u8, high: u8, out: &mut Vec<u8>) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// Appends one frame.
pub(super) fn write_frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8], out: &mut Vec<u8>) {
    let len = payload.len();
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream_id.to_be_bytes());
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_match_the_rfc_examples() {
        let mut out = Vec::new();
        encode_integer(10, 5, 0, &mut out);
        assert_eq!(out, [10]);
        out.clear();
        encode_integer(1337, 5, 0, &mut out);
        assert_eq!(out, [31, 154, 10]);
    }
}
