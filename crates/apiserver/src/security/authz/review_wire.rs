//! The protobuf form of the review requests: kubectl's typed clients send SelfSubjectReview,
//! SelfSubjectAccessReview and SelfSubjectRulesReview as `application/vnd.kubernetes.protobuf`
//! (and take a JSON answer). This reads the `k8s\0` envelope (`runtime.Unknown`) and the few
//! spec fields a review has, into the JSON the handlers take; the wire format is read by
//! `protobuf::wire`, as every other protobuf body is.

use crate::errors::ApiError;
use crate::wire::protobuf::wire::{Field, fields};
use serde_json::{Map, Value, json};

/// The Content-Type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = crate::wire::protobuf::CONTENT_TYPE;

const MAGIC: &[u8] = crate::wire::protobuf::MAGIC;

fn malformed(what: &str) -> ApiError {
    ApiError::bad_request(format!("malformed protobuf body: {what}"))
}

fn message(buf: &[u8], number: u64) -> Result<Option<&[u8]>, ApiError> {
    Ok(fields(buf)?.into_iter().find_map(|(n, f)| match f {
        Field::Bytes(b) if n == number => Some(b),
        _ => None,
    }))
}

/// The string fields of a message by number, as a JSON object with the given names.
fn strings(buf: &[u8], names: &[(u64, &str)]) -> Result<Value, ApiError> {
    let mut out = Map::new();
    for (n, f) in fields(buf)? {
        if let (Some((_, name)), Field::Bytes(b)) = (names.iter().find(|(k, _)| *k == n), f) {
            let s = std::str::from_utf8(b).map_err(|_| malformed("a string is not UTF-8"))?;
            if !s.is_empty() {
                out.insert((*name).to_string(), json!(s));
            }
        }
    }
    Ok(Value::Object(out))
}

const RESOURCE_ATTRIBUTES: &[(u64, &str)] = &[
    (1, "namespace"),
    (2, "verb"),
    (3, "group"),
    (4, "version"),
    (5, "resource"),
    (6, "subresource"),
    (7, "name"),
];
const NON_RESOURCE_ATTRIBUTES: &[(u64, &str)] = &[(1, "path"), (2, "verb")];

/// Decodes a protobuf review request into its JSON form (apiVersion, kind and spec).
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| malformed("no k8s envelope"))?;
    let type_meta = message(envelope, 1)?.unwrap_or_default();
    let tm = strings(type_meta, &[(1, "apiVersion"), (2, "kind")])?;
    let raw = message(envelope, 2)?.unwrap_or_default();
    let kind = tm
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut obj = tm;
    let spec_bytes = message(raw, 2)?;
    let spec = match (kind.as_str(), spec_bytes) {
        ("SelfSubjectAccessReview", Some(s)) => {
            let mut spec = Map::new();
            if let Some(r) = message(s, 1)? {
                spec.insert(
                    "resourceAttributes".into(),
                    strings(r, RESOURCE_ATTRIBUTES)?,
                );
            }
            if let Some(n) = message(s, 2)? {
                spec.insert(
                    "nonResourceAttributes".into(),
                    strings(n, NON_RESOURCE_ATTRIBUTES)?,
                );
            }
            Some(Value::Object(spec))
        }
        ("SelfSubjectRulesReview", Some(s)) => Some(strings(s, &[(1, "namespace")])?),
        ("SelfSubjectReview", _) => None,
        _ => {
            return Err(ApiError::unsupported_media(&format!(
                "{CONTENT_TYPE} (only the self-subject reviews are read as protobuf)"
            )));
        }
    };
    if let (Some(spec), Some(o)) = (spec, obj.as_object_mut()) {
        o.insert("spec".into(), spec);
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_kubectl_sends() {
        // `kubectl auth can-i patch pods --subresource=status -n ns1`, as kubectl 1.32 sent it.
        let body = b"k8s\x00\n2\n\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12@\n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\"\n \n\x03ns1\x12\x05patch\x1a\x00\"\x00*\x04pods2\x06status:\x00\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00\"\x00";
        assert_eq!(
            decode(body).unwrap(),
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"namespace": "ns1", "verb": "patch", "resource": "pods", "subresource": "status"}}})
        );
        // `kubectl auth can-i get /healthz`.
        let body = b"k8s\x00\n2\n\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12/\n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x11\x12\x0f\n\x08/healthz\x12\x03get\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00\"\x00";
        assert_eq!(
            decode(body).unwrap()["spec"],
            json!({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}})
        );
        // `kubectl auth can-i --list -n ns1`.
        let body = b"k8s\x00\n1\n\x17authorization.k8s.io/v1\x12\x16SelfSubjectRulesReview\x12\x1f\n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x05\n\x03ns1\x1a\x04\x18\x00\"\x00\x1a\x00\"\x00";
        assert_eq!(decode(body).unwrap()["spec"], json!({"namespace": "ns1"}));
        assert_eq!(decode(b"k8s\x00\n\x05\n\x03").unwrap_err().code, 400);
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
    }

    proptest::proptest! {
        #[test]
        fn any_body_is_an_answer_not_a_panic(tail in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let mut body = MAGIC.to_vec();
            body.extend(tail);
            let _ = decode(&body);
        }
    }
}
