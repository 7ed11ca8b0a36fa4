//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`): the `k8s\0` magic, the
//! `runtime.Unknown` envelope, then the kind's message, decoded by the field tables of
//! `schema` into the JSON the server stores. A field the tables do not know is refused (400),
//! never dropped.

mod schema;
pub(crate) mod wire;

use crate::errors::ApiError;
use base64::Engine as _;
use serde_json::{Map, Value, json};
use wire::{Field, fields};

/// The Content-Type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The bytes every protobuf body starts with.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

/// How deep messages may nest; the tables nest far less, so deeper input is hostile.
const MAX_DEPTH: usize = 32;

/// Whether a Content-Type names the protobuf encoding.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case(CONTENT_TYPE)
}

fn malformed(what: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("malformed protobuf body: {what}"))
}

/// Decodes a protobuf body sent for a resource of `group`/`kind` into its JSON form.
pub fn decode(group: &str, kind: &str, body: &[u8]) -> Result<Value, ApiError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| malformed("no k8s envelope"))?;
    let mut type_meta = None;
    let mut raw: &[u8] = &[];
    for (n, f) in fields(envelope)? {
        match (n, f) {
            (1, Field::Bytes(b)) => type_meta = Some(b),
            (2, Field::Bytes(b)) => raw = b,
            (3 | 4, Field::Bytes([])) => {}
            (3, _) => return Err(malformed("content encodings are not supported")),
            (4, Field::Bytes(b)) if b == b"application/vnd.kubernetes.protobuf" => {}
            _ => return Err(malformed(format!("unknown envelope field {n}"))),
        }
    }
    let mut obj = Map::new();
    if let Some(tm) = type_meta {
        for (n, f) in fields(tm)? {
            let name = match n {
                1 => "apiVersion",
                2 => "kind",
                _ => return Err(malformed(format!("unknown TypeMeta field {n}"))),
            };
            let s = string(n, f)?;
            if !s.is_empty() {
                obj.insert(name.into(), json!(s));
            }
        }
    }
    let sent_kind = obj.get("kind").and_then(Value::as_str).unwrap_or(kind);
    // A subresource's body names its own group (an Eviction is policy/v1 on a core pod).
    let group = match obj.get("apiVersion").and_then(Value::as_str) {
        Some(av) => av.rsplit_once('/').map_or("", |(g, _)| g),
        None => group,
    };
    let root = schema::root(group, sent_kind).ok_or_else(|| {
        ApiError::unsupported_media(&format!(
            "{CONTENT_TYPE} (the protobuf form of {sent_kind} is not read; send JSON)"
        ))
    })?;
    let body = message(raw, root, 0)?;
    obj.extend(body);
    Ok(Value::Object(obj))
}

fn string(n: u64, f: Field<'_>) -> Result<String, ApiError> {
    match f {
        Field::Bytes(b) => std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| malformed(format!("field {n} is not UTF-8"))),
        _ => Err(malformed(format!("field {n} should be a string"))),
    }
}

fn message(buf: &[u8], msg: &schema::Msg, depth: usize) -> Result<Map<String, Value>, ApiError> {
    if depth > MAX_DEPTH {
        return Err(malformed("messages nest too deep"));
    }
    let mut out = Map::new();
    for (n, f) in fields(buf)? {
        let def = msg
            .fields
            .iter()
            .find(|d| u64::from(d.num) == n)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "protobuf body: unknown field number {n} in {}; it is refused rather than dropped",
                    msg.name
                ))
            })?;
        if let (schema::Card::Repeated, schema::Ty::Int | schema::Ty::Bool, Field::Bytes(b)) =
            (def.card, def.ty, &f)
        {
            // A packed list of scalars: one field with every element.
            let list = out
                .entry(def.name)
                .or_insert_with(|| Value::Array(Vec::new()));
            for v in wire::packed(b)? {
                if let Value::Array(a) = list {
                    a.push(scalar(def.ty, v));
                }
            }
            continue;
        }
        let value = value(n, f, def.ty, depth)?;
        match def.card {
            schema::Card::Repeated => {
                let list = out
                    .entry(def.name)
                    .or_insert_with(|| Value::Array(Vec::new()));
                // A list keeps its empty strings: `apiGroups: [""]` is the core group.
                if let Value::Array(a) = list {
                    a.push(value.unwrap_or_else(|| json!("")));
                }
            }
            schema::Card::Map => {
                let Some(Value::Array(kv)) = value else {
                    return Err(malformed(format!("bad map entry in {}", msg.name)));
                };
                let entry = out.entry(def.name).or_insert_with(|| json!({}));
                if let (Value::Object(m), [Value::String(k), v]) = (entry, kv.as_slice()) {
                    m.insert(k.clone(), v.clone());
                }
            }
            schema::Card::Inline => {
                if let Some(Value::Object(fields)) = value {
                    out.extend(fields);
                }
            }
            schema::Card::One => match value {
                Some(v) => {
                    out.insert(def.name.to_string(), v);
                }
                None => {
                    out.remove(def.name);
                }
            },
        }
    }
    Ok(out)
}

/// One field's JSON value; None for the zero values that Go's JSON leaves out.
fn value(n: u64, f: Field<'_>, ty: schema::Ty, depth: usize) -> Result<Option<Value>, ApiError> {
    use schema::Ty;
    Ok(match (ty, f) {
        (Ty::Str, f) => {
            let s = string(n, f)?;
            (!s.is_empty()).then(|| json!(s))
        }
        (Ty::Bytes, Field::Bytes(b)) => {
            Some(json!(base64::engine::general_purpose::STANDARD.encode(b)))
        }
        (Ty::StrKeep, f) => Some(json!(string(n, f)?)),
        (Ty::Bool | Ty::Int, Field::Varint(v)) => Some(scalar(ty, v)),
        (Ty::IntOmitZero, Field::Varint(v)) => (v != 0).then(|| json!(v as i64)),
        (Ty::Msg(m), Field::Bytes(b)) => Some(Value::Object(message(b, m, depth + 1)?)),
        (Ty::Time, Field::Bytes(b)) => time(b, false)?,
        (Ty::MicroTime, Field::Bytes(b)) => time(b, true)?,
        (Ty::Quantity, Field::Bytes(b)) => {
            let mut q = None;
            for (qn, qf) in fields(b)? {
                match qn {
                    1 => q = Some(string(qn, qf)?),
                    _ => return Err(malformed(format!("bad Quantity field {qn}"))),
                }
            }
            // Go's JSON writes the zero Quantity as "0".
            Some(json!(
                q.filter(|s| !s.is_empty()).unwrap_or_else(|| "0".into())
            ))
        }
        (Ty::IntOrString, Field::Bytes(b)) => int_or_string(b)?,
        (Ty::RawJson, Field::Bytes(b)) => {
            let raw = message(b, &schema::RAW, depth + 1)?;
            match raw.get("raw").and_then(Value::as_str) {
                None => None,
                Some(b64) => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .map_err(|_| malformed("raw field"))?;
                    Some(
                        serde_json::from_slice(&bytes)
                            .map_err(|e| malformed(format!("embedded JSON: {e}")))?,
                    )
                }
            }
        }
        (Ty::Entry(v), Field::Bytes(b)) => {
            let mut key = String::new();
            let mut val = None;
            for (en, ef) in fields(b)? {
                match en {
                    1 => key = string(en, ef)?,
                    2 => val = value(en, ef, *v, depth + 1)?,
                    _ => return Err(malformed(format!("unknown map entry field {en}"))),
                }
            }
            let val = val.unwrap_or_else(|| match v {
                Ty::Bytes | Ty::Str => json!(""),
                _ => Value::Null,
            });
            Some(json!([key, val]))
        }
        _ => return Err(malformed(format!("field {n} has the wrong wire type"))),
    })
}

/// A varint as the JSON of a bool or an int (int32 negatives are sign-extended on the wire).
fn scalar(ty: schema::Ty, v: u64) -> Value {
    match ty {
        schema::Ty::Bool => json!(v != 0),
        _ => json!(v as i64),
    }
}

/// An `intstr.IntOrString`: type 0 is the int (field 2), type 1 the string (field 3).
fn int_or_string(b: &[u8]) -> Result<Option<Value>, ApiError> {
    let (mut kind, mut int, mut text) = (0u64, 0i64, String::new());
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Varint(v)) => kind = v,
            (2, Field::Varint(v)) => int = i64::from(v as i64 as i32),
            (3, f) => text = string(n, f)?,
            _ => return Err(malformed(format!("bad IntOrString field {n}"))),
        }
    }
    match kind {
        0 => Ok(Some(json!(int))),
        1 => Ok(Some(json!(text))),
        other => Err(malformed(format!("IntOrString type {other}"))),
    }
}

/// A `metav1.Time` (whole seconds) or `metav1.MicroTime` (microseconds) as RFC 3339; the zero
/// time is left out, as Go's JSON does.
fn time(b: &[u8], micro: bool) -> Result<Option<Value>, ApiError> {
    let (mut secs, mut nanos) = (0i64, 0i64);
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Varint(v)) => secs = v as i64,
            (2, Field::Varint(v)) => nanos = i64::from(v as i64 as i32),
            _ => return Err(malformed(format!("bad Time field {n}"))),
        }
    }
    if secs == 0 && nanos == 0 {
        return Ok(None);
    }
    let ts = jiff::Timestamp::new(secs, i32::try_from(nanos).unwrap_or(0))
        .map_err(|e| malformed(format!("time out of range: {e}")))?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Some(json!(ts.strftime(format).to_string())))
}

#[cfg(test)]
mod tests;
