//! Hostile API clients: requests cost bounded work, and what the caller may not do is refused
//! before the body is buffered or parsed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;

const TOKENS: &str =
    "admin-token,admin,1,\"system:masters\"\nnode-a-token,system:node:node-a,2,\"system:nodes\"\n";

/// A YAML body nested `depth` levels deep in flow style.
fn deep_yaml(depth: usize) -> Vec<u8> {
    format!(
        "metadata: {{name: x}}\nspec: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_request_is_refused_before_its_body_is_buffered_or_parsed() {
    let (_d, _s, api) = start_server_with_tokens(TOKENS, &[]);
    let node = api.with_token("node-a-token");
    // Larger than any accepted body: buffering it first would answer 413.
    let huge = vec![b' '; 4 * 1024 * 1024];
    let r = node
        .raw("POST", PODS, Some("application/json"), None, huge)
        .await;
    assert_eq!(r.code, 403, "{}", r.text);
    assert_eq!(r.json["kind"], "Status", "{}", r.text);
    // The same from an identity that may create the object is read, and too large.
    let r = node
        .raw(
            "POST",
            "/api/v1/namespaces/default/events",
            Some("application/json"),
            None,
            vec![b' '; 4 * 1024 * 1024],
        )
        .await;
    assert_eq!(r.code, 413, "{}", r.text);
    // A deep YAML body from an identity that may not create pods is not parsed either.
    let r = node
        .raw(
            "POST",
            PODS,
            Some("application/yaml"),
            None,
            deep_yaml(20_000),
        )
        .await;
    assert_eq!(r.code, 403, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_nesting_is_bounded_before_parsing() {
    let (_dir, _server, api) = start_server(&[]);
    for (method, path, ct) in [
        ("POST", PVCS.to_string(), "application/yaml"),
        (
            "PATCH",
            format!("{PVCS}/x?fieldManager=m"),
            "application/apply-patch+yaml",
        ),
    ] {
        let r = api
            .raw(method, &path, Some(ct), None, deep_yaml(20_000))
            .await;
        assert_eq!(r.code, 400, "{method} {path}: {}", r.text);
        assert!(
            r.json["message"]
                .as_str()
                .is_some_and(|m| m.contains("nests deeper than 128 levels")),
            "{method} {path}: {}",
            r.text
        );
    }
    // A manifest of ordinary depth is fine.
    let ok = api
        .raw(
            "POST",
            PVCS,
            Some("application/yaml"),
            None,
            b"metadata:\n  name: shallow\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 1Gi}\n".to_vec(),
        )
        .await;
    assert_eq!(ok.code, 201, "{}", ok.text);
}
