//! The protobuf wire format: varints and length-delimited fields, bounds-checked.

use super::malformed;
use crate::errors::ApiError;

/// One field's payload.
pub(crate) enum Field<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 2.
    Bytes(&'a [u8]),
    /// Wire types 1 and 5 (no table field uses them).
    Fixed,
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, ApiError> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or_else(|| malformed("truncated varint"))?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(malformed("varint too long"))
}

fn take<'a>(buf: &'a [u8], pos: &mut usize, len: usize) -> Result<&'a [u8], ApiError> {
    let end = pos
        .checked_add(len)
        .filter(|e| *e <= buf.len())
        .ok_or_else(|| malformed("truncated field"))?;
    let bytes = &buf[*pos..end];
    *pos = end;
    Ok(bytes)
}

/// The fields of one message, in order.
pub(crate) fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ApiError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (number, wire) = (key >> 3, key & 7);
        if number == 0 {
            return Err(malformed("field number 0"));
        }
        let field = match wire {
            0 => Field::Varint(varint(buf, &mut pos)?),
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?)
                    .map_err(|_| malformed("length too large"))?;
                Field::Bytes(take(buf, &mut pos, len)?)
            }
            1 => {
                take(buf, &mut pos, 8)?;
                Field::Fixed
            }
            5 => {
                take(buf, &mut pos, 4)?;
                Field::Fixed
            }
            _ => return Err(malformed("unsupported wire type")),
        };
        out.push((number, field));
    }
    Ok(out)
}

/// The varints of a packed repeated scalar field.
pub(super) fn packed(buf: &[u8]) -> Result<Vec<u64>, ApiError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        out.push(varint(buf, &mut pos)?);
    }
    Ok(out)
}
