//! Parsing of what a request asks for: the resource path, query parameters and the wanted
//! response format.

use crate::errors::ApiError;
use crate::registry::{self, ResourceDef};
use crate::wire::table::IncludeObject;
use std::collections::HashMap;

/// A resource request's target.
#[derive(Debug, Clone)]
pub struct Target {
    /// The resource.
    pub def: &'static ResourceDef,
    /// Namespace from the path ("" when none).
    pub ns: String,
    /// Object name, when the path names one.
    pub name: Option<String>,
    /// Subresource ("status"), when present.
    pub sub: Option<String>,
}

/// What a path names.
#[derive(Debug, Clone)]
pub enum Route {
    /// `GET /api/v1` or `/apis/{g}/{v}`.
    ResourceList(String, String),
    /// `GET /apis/{g}`.
    Group(String),
    /// A resource request.
    Resource(Target),
}

/// Decodes `%XX` and `+` in a query component.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string into a map (last value wins).
pub fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        m.insert(percent_decode(k), percent_decode(v));
    }
    m
}

/// Go's `strconv.ParseBool`, which clients rely on (`watch=True`).
pub fn parse_bool(s: Option<&str>) -> bool {
    matches!(s, Some("1" | "t" | "T" | "true" | "TRUE" | "True"))
}

/// Parses `/api/v1/...` and `/apis/{g}/{v}/...`; None for paths that name nothing.
pub fn route(path: &str) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g] => return Ok(Route::Group(g.to_string())),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route()),
    };
    if rest.is_empty() {
        return Ok(Route::ResourceList(group.to_string(), version.to_string()));
    }
    let (ns, rest) = match rest {
        ["namespaces", ns, res, more @ ..] if *res != "status" && *res != "finalize" => {
            (ns.to_string(), {
                let mut v = vec![*res];
                v.extend_from_slice(more);
                v
            })
        }
        other => (String::new(), other.to_vec()),
    };
    let def = registry::find(group, version, rest[0]).ok_or_else(ApiError::no_route)?;
    if !ns.is_empty() && !def.namespaced {
        return Err(ApiError::no_route());
    }
    let name = rest.get(1).map(|s| s.to_string());
    let sub = match rest.get(2) {
        None => None,
        Some(&"status") if def.has_status => Some("status".to_string()),
        Some(&"eviction") if def.plural == "pods" && def.group.is_empty() => {
            Some("eviction".to_string())
        }
        Some(&"binding") if def.plural == "pods" && def.group.is_empty() => {
            Some("binding".to_string())
        }
        Some(_) => return Err(ApiError::no_route()),
    };
    if rest.len() > 3 {
        return Err(ApiError::no_route());
    }
    Ok(Route::Resource(Target { def, ns, name, sub }))
}

/// The response format the Accept header asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain objects.
    Json,
    /// `meta.k8s.io/v1` Table.
    Table(IncludeObject),
    /// PartialObjectMetadata(List).
    Partial,
}

/// Picks the first media type of the Accept header that can be served; JSON otherwise (never 406).
pub fn format(accept: &str, include: Option<&str>) -> Format {
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        let media = params.first().copied().unwrap_or("");
        if media.contains("protobuf") || media.contains("cbor") {
            continue;
        }
        let as_ = params.iter().find_map(|p| p.strip_prefix("as="));
        let meta = params.contains(&"g=meta.k8s.io");
        match as_ {
            Some("Table") if meta => return Format::Table(IncludeObject::parse(include)),
            Some("PartialObjectMetadata" | "PartialObjectMetadataList") if meta => {
                return Format::Partial;
            }
            Some(_) => continue,
            None => return Format::Json,
        }
    }
    Format::Json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_queries() {
        let Route::Resource(t) =
            route("/api/v1/namespaces/default/persistentvolumeclaims/d/status").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (
                t.def.plural,
                t.ns.as_str(),
                t.name.as_deref(),
                t.sub.as_deref()
            ),
            (
                "persistentvolumeclaims",
                "default",
                Some("d"),
                Some("status")
            )
        );
        let Route::Resource(t) = route("/api/v1/namespaces/default").unwrap() else {
            panic!()
        };
        assert_eq!(
            (t.def.plural, t.name.as_deref()),
            ("namespaces", Some("default"))
        );
        assert!(route("/api/v1/bogus").is_err());
        assert!(route("/apis/storage.k8s.io/v1/namespaces/x/csinodes").is_err());
        let q = parse_query(Some(
            "fieldSelector=involvedObject.name%3Dd%2CinvolvedObject.kind%3DPod&watch=True",
        ));
        assert_eq!(
            q["fieldSelector"],
            "involvedObject.name=d,involvedObject.kind=Pod"
        );
        assert!(parse_bool(q.get("watch").map(String::as_str)));
        assert_eq!(
            format(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
                None
            ),
            Format::Table(IncludeObject::Metadata)
        );
        assert_eq!(
            format("application/vnd.kubernetes.protobuf,application/json", None),
            Format::Json
        );
        assert_eq!(format("", None), Format::Json);
    }
}
