//! A small raw-HTTP client for the API server end-to-end tests: exact status codes, headers and
//! watch lines, without a Kubernetes client library in between.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::time::Duration;

/// A server on a fresh data directory, started with the `extra` flags, and a client for it
/// (the directory is removed when the first is dropped: keep it for as long as the server runs).
pub fn start_server(extra: &[&str]) -> (tempfile::TempDir, volhealth_testkit::ApiServer, Api) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = volhealth_testkit::start_apiserver(dir.path(), extra);
    let api = Api::new(&server.url);
    (dir, server, api)
}

/// Like [`start_server`], with the identities of the token file `tokens` (see testkit's
/// `start_apiserver_with_tokens`); the client sends no token.
pub fn start_server_with_tokens(
    tokens: &str,
    extra: &[&str],
) -> (tempfile::TempDir, volhealth_testkit::ApiServer, Api) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = volhealth_testkit::start_apiserver_with_tokens(dir.path(), tokens, extra);
    let api = Api::new(&server.url);
    (dir, server, api)
}

/// The `type` of each watch event.
pub fn event_types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// The `metadata.resourceVersion` of an object, as a number.
pub fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("resourceVersion")
}

impl Answer {
    /// The status code and the `reason` of the body (a Status' reason, such as `NotFound`).
    pub fn code_and_reason(&self) -> (u16, Option<&str>) {
        (self.code, self.json["reason"].as_str())
    }

    /// The `message` of the body (a Status' message); a body without one fails the test.
    pub fn message(&self) -> &str {
        self.json["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no message in the answer: {}", self.text))
    }

    /// The answer of `resp`: None when its body cannot be read.
    async fn read(resp: reqwest::Response) -> Option<Answer> {
        let code = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let warnings = resp
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        let text = resp.text().await.ok()?;
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Some(Answer {
            code,
            content_type,
            warnings,
            text,
            json,
        })
    }
}

/// A client for one server, optionally with a bearer token.
#[derive(Clone)]
pub struct Api {
    /// Base URL.
    pub url: String,
    /// Bearer token.
    pub token: Option<String>,
    client: reqwest::Client,
}

/// One answer: status code, Content-Type, Warning headers and decoded JSON body (Null when not
/// JSON).
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub code: u16,
    /// Content-Type header.
    pub content_type: String,
    /// Every Warning header, in order.
    pub warnings: Vec<String>,
    /// The raw body.
    pub text: String,
    /// The body as JSON.
    pub json: Value,
}

impl Api {
    /// A client for `url`.
    pub fn new(url: &str) -> Api {
        Api {
            url: url.to_string(),
            token: None,
            client: reqwest::Client::new(),
        }
    }

    /// The same server with a bearer token.
    pub fn with_token(&self, token: &str) -> Api {
        Api {
            url: self.url.clone(),
            token: Some(token.to_string()),
            client: self.client.clone(),
        }
    }

    /// Like [`Api::raw`], but None when the connection fails (the server was killed).
    pub async fn try_raw(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Option<Answer> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut rb = self
            .client
            .request(method, format!("{}{}", self.url, path))
            .timeout(Duration::from_secs(30));
        rb = rb.header("content-type", content_type);
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        let resp = rb.body(body).send().await.ok()?;
        Answer::read(resp).await
    }

    /// Sends a request with a raw body.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Vec<u8>,
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut rb = self
            .client
            .request(method, format!("{}{}", self.url, path))
            .timeout(Duration::from_secs(60));
        if let Some(ct) = content_type {
            rb = rb.header("content-type", ct);
        }
        if let Some(a) = accept {
            rb = rb.header("accept", a);
        }
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        let resp = rb
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("request {path}: {e}"));
        Answer::read(resp).await.expect("body")
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Answer {
        self.raw("GET", path, None, None, Vec::new()).await
    }

    /// GET with an `Accept` header.
    pub async fn get_as(&self, path: &str, accept: &str) -> Answer {
        self.raw("GET", path, None, Some(accept), Vec::new()).await
    }

    /// POST a JSON object.
    pub async fn post(&self, path: &str, body: &Value) -> Answer {
        self.raw(
            "POST",
            path,
            Some("application/json"),
            None,
            body.to_string().into_bytes(),
        )
        .await
    }

    /// POST a JSON object that must be created (201); answers the reply.
    pub async fn create(&self, path: &str, body: &Value) -> Answer {
        let r = self.post(path, body).await;
        assert_eq!(r.code, 201, "POST {path}: {}", r.text);
        r
    }

    /// PUT a JSON object.
    pub async fn put(&self, path: &str, body: &Value) -> Answer {
        self.raw(
            "PUT",
            path,
            Some("application/json"),
            None,
            body.to_string().into_bytes(),
        )
        .await
    }

    /// PATCH with the given patch content type.
    pub async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Answer {
        self.raw(
            "PATCH",
            path,
            Some(content_type),
            None,
            body.to_string().into_bytes(),
        )
        .await
    }

    /// DELETE.
    pub async fn delete(&self, path: &str) -> Answer {
        self.raw("DELETE", path, None, None, Vec::new()).await
    }

    /// Every event of a watch until the stream ends or `limit` passes.
    pub async fn watch_all(&self, path: &str, limit: Duration) -> Vec<Value> {
        self.watch(path, limit, |_| false).await
    }

    /// The events of a watch once there are `count` of them (fewer when the stream ends or
    /// `limit` passes first).
    pub async fn watch_n(&self, path: &str, limit: Duration, count: usize) -> Vec<Value> {
        self.watch(path, limit, |e| e.len() >= count).await
    }

    /// Runs a watch request and collects events until `done` says so, the stream ends, or
    /// `limit` passes.
    pub async fn watch(
        &self,
        path: &str,
        limit: Duration,
        mut done: impl FnMut(&[Value]) -> bool,
    ) -> Vec<Value> {
        let mut rb = self.client.get(format!("{}{}", self.url, path));
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        let mut resp = rb
            .send()
            .await
            .unwrap_or_else(|e| panic!("watch {path}: {e}"));
        assert_eq!(resp.status().as_u16(), 200, "watch {path}");
        let mut buf = Vec::new();
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if done(&events) {
                return events;
            }
            let chunk = match tokio::time::timeout_at(deadline, resp.chunk()).await {
                Err(_) => return events,
                Ok(Ok(Some(c))) => c,
                Ok(_) => return events,
            };
            buf.extend_from_slice(&chunk);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                let v: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
                    panic!("watch line {:?}: {e}", String::from_utf8_lossy(&line))
                });
                events.push(v);
            }
        }
    }
}

/// The `name` of each entry of a JSON array (API resources, table columns).
pub fn names(entries: &Value) -> Vec<&str> {
    entries
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {entries}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

/// The `metadata.name` of each item of a list.
pub fn item_names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect()
}

/// The resource `name` of a discovery document's `resources`.
pub fn resource<'a>(discovery: &'a Value, name: &str) -> Option<&'a Value> {
    discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
}

/// A minimal PVC.
pub fn pvc(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
}

/// A minimal pod bound to `node`, using PVC `claim` as volume `data`.
pub fn pod(name: &str, node: &str, claim: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})
}

/// A CSINode with one driver.
pub fn csinode(name: &str, driver: &str) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
        "spec": {"drivers": [{"name": driver, "nodeID": name}]}})
}

/// A health condition list with one entry.
pub fn conditions(status: &str, reason: &str) -> Value {
    json!([{"status": status, "reason": reason, "message": format!("{status} because {reason}")}])
}

/// The PVC collection path in namespace `default`.
pub const PVCS: &str = "/api/v1/namespaces/default/persistentvolumeclaims";
/// The pod collection path in namespace `default`.
pub const PODS: &str = "/api/v1/namespaces/default/pods";
/// The CSINode collection path.
pub const CSINODES: &str = "/apis/storage.k8s.io/v1/csinodes";
/// Merge patch content type.
pub const MERGE: &str = "application/merge-patch+json";
/// Strategic merge patch content type.
pub const STRATEGIC: &str = "application/strategic-merge-patch+json";
/// JSON patch content type.
pub const JSONPATCH: &str = "application/json-patch+json";
