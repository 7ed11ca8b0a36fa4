//! Lists in chunks (`limit` and `continue`), as kube-apiserver serves them: a list with
//! `limit=N` returns at most N objects, in namespace/name order, and when more remain a
//! `metadata.continue` token and `remainingItemCount`; the next request passes the token back
//! (with the same selectors) and gets the next chunk. kubectl (500 at a time), client-go's
//! pager and `volhealth status` read long lists that way.
//!
//! The token holds the list's resourceVersion and the key of the next object. Every chunk
//! reports the first chunk's resourceVersion, as kube-apiserver does. Unlike kube-apiserver,
//! which serves later chunks from a snapshot at that version, this server serves them from the
//! objects as they are now: an object created or deleted between two chunks may be missing or
//! appear, as it may be for a client that lists again anyway.

use crate::errors::ApiError;
use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// One chunk of a list.
#[derive(Debug)]
pub struct Chunk {
    /// The list's resourceVersion (the first chunk's, for every chunk).
    pub resource_version: u64,
    /// The objects of this chunk.
    pub items: Vec<Arc<Value>>,
    /// The token of the next chunk, and how many objects remain, when more remain.
    pub more: Option<(String, u64)>,
}

/// `namespace/name` of a stored object: the order chunks follow.
fn key(obj: &Value) -> String {
    let m = &obj["metadata"];
    format!(
        "{}/{}",
        m["namespace"].as_str().unwrap_or_default(),
        m["name"].as_str().unwrap_or_default()
    )
}

fn invalid_token() -> ApiError {
    ApiError::bad_request(
        "continue key is not valid: the token was not issued by this server or was altered; list again without it",
    )
}

fn encode(rv: u64, start: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"rv": rv, "start": start}).to_string())
}

fn decode(token: &str) -> Result<(u64, String), ApiError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid_token())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| invalid_token())?;
    match (v["rv"].as_u64(), v["start"].as_str()) {
        (Some(rv), Some(start)) => Ok((rv, start.to_string())),
        _ => Err(invalid_token()),
    }
}

/// The chunk `query` asks for (`limit`, `continue`) of `items`, listed at `rv`. Without a
/// `limit` (or with `limit=0`) every object is one chunk.
pub fn chunk(
    rv: u64,
    mut items: Vec<Arc<Value>>,
    query: &HashMap<String, String>,
) -> Result<Chunk, ApiError> {
    let q = |k: &str| query.get(k).map(String::as_str).filter(|s| !s.is_empty());
    let limit = match q("limit") {
        None => 0,
        Some(l) => l.parse::<i64>().map_err(|_| {
            ApiError::bad_request(format!("limit: Invalid value: \"{l}\": must be an integer"))
        })?,
    };
    let (rv, start) = match q("continue") {
        Some(token) => decode(token)?,
        None => (rv, String::new()),
    };
    items.sort_by_cached_key(|o| key(o));
    if !start.is_empty() {
        items.retain(|o| key(o) >= start);
    }
    let limit = usize::try_from(limit).unwrap_or(0);
    if limit == 0 || items.len() <= limit {
        return Ok(Chunk {
            resource_version: rv,
            items,
            more: None,
        });
    }
    let rest = items.split_off(limit);
    let next = encode(rv, &key(&rest[0]));
    Ok(Chunk {
        resource_version: rv,
        items,
        more: Some((next, rest.len() as u64)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(n: usize) -> Vec<Arc<Value>> {
        (0..n)
            .rev()
            .map(|i| {
                Arc::new(json!({"metadata": {"namespace": "ns", "name": format!("o-{i:03}")}}))
            })
            .collect()
    }

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn names(c: &Chunk) -> Vec<String> {
        c.items
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn chunks_cover_every_object_once_in_order_at_the_first_version() {
        let mut seen = Vec::new();
        let mut token = String::new();
        let mut chunks = 0;
        loop {
            let mut q = vec![("limit", "4")];
            if !token.is_empty() {
                q.push(("continue", token.as_str()));
            }
            // Later chunks are listed at a newer version; they report the first one.
            let rv = if chunks == 0 { 7 } else { 9 };
            let c = chunk(rv, objects(10), &query(&q)).unwrap();
            assert_eq!(c.resource_version, 7);
            seen.extend(names(&c));
            chunks += 1;
            match c.more {
                Some((next, remaining)) => {
                    assert_eq!(remaining as usize, 10 - seen.len());
                    token = next;
                }
                None => break,
            }
        }
        assert_eq!(chunks, 3);
        let want: Vec<String> = (0..10).map(|i| format!("o-{i:03}")).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn no_limit_is_one_chunk_and_bad_input_is_refused() {
        let c = chunk(1, objects(3), &query(&[])).unwrap();
        assert_eq!(c.items.len(), 3);
        assert!(c.more.is_none());
        assert!(
            chunk(1, objects(3), &query(&[("limit", "0")]))
                .unwrap()
                .more
                .is_none()
        );
        assert!(chunk(1, objects(3), &query(&[("limit", "x")])).is_err());
        assert!(chunk(1, objects(3), &query(&[("continue", "!!")])).is_err());
        let not_ours = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("{\"a\":1}");
        assert!(chunk(1, objects(3), &query(&[("continue", &not_ours)])).is_err());
    }
}
