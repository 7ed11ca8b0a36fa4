//! The admin connection to the cluster `up` and `bench` start, and to the one a kubeconfig
//! names for the cluster controllers: the configuration found as every volhealth component finds
//! it (`volhealth_kube_access::client`), with a timeout on connecting and on each response.
//!
//! `volhealth status` connects the same way with impersonation and contexts on top
//! (`cmd/status/kubeconfig.rs` in the binary); this is the part the local cluster needs.

use anyhow::Context as _;
use std::path::Path;
use std::time::Duration;
use volhealth_kube_access::{Error, client};

/// A connected client and what the user needs to know when a call fails.
pub(crate) struct Connection {
    /// The client.
    pub client: kube::Client,
    /// The server URL, for error messages.
    pub server: String,
    /// Where the configuration came from, for error messages.
    pub origin: String,
}

/// Builds a client whose connecting and responses are each bounded by `timeout`.
pub(crate) async fn connect(
    kubeconfig: Option<&Path>,
    timeout: Duration,
) -> anyhow::Result<Connection> {
    let mut loaded = client::load_config(kubeconfig, None)
        .await
        .map_err(|e| match &e {
            // kube's kubeconfig errors repeat each layer's message; the cause that matters is
            // the innermost one.
            Error::ReadKubeconfig { path, source } => anyhow::anyhow!(
                "reading kubeconfig {}: {}",
                path.display(),
                root_cause(source)
            ),
            Error::NoKubeconfig { origin, source } => anyhow::anyhow!(
                "no usable kubeconfig: {origin}: {}; not in a cluster either (no service account). Pass --kubeconfig FILE or set KUBECONFIG",
                root_cause(source)
            ),
            _ => anyhow::Error::new(e),
        })?;
    let origin = loaded.source.to_string();
    let config = &mut loaded.config;
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let loaded = loaded
        .into_client()
        .with_context(|| format!("building a client for {server}"))?;
    Ok(Connection {
        client: loaded.client,
        server,
        origin,
    })
}

/// The innermost message of an error chain: the cause itself, without the layers that
/// wrap it (which often repeat it).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    inner.to_string()
}

/// Explains a failed API call: unreachable, refused credentials, or another API error.
pub(crate) fn explain(err: &kube::Error, what: &str, conn: &Connection) -> anyhow::Error {
    match err {
        kube::Error::Api(status) if status.code == 401 => anyhow::anyhow!(
            "{what}: the API server at {} did not accept the credentials in the {} (401 Unauthorized)",
            conn.server,
            conn.origin
        ),
        kube::Error::Api(status) if status.code == 403 => anyhow::anyhow!(
            "{what}: the API server at {} refused: {} (403 Forbidden; the identity in the {} may not read this)",
            conn.server,
            status.message,
            conn.origin
        ),
        kube::Error::Api(status) => {
            anyhow::anyhow!(
                "{what}: the API server at {} answered {}: {}",
                conn.server,
                status.code,
                status.message
            )
        }
        other => anyhow::anyhow!(
            "{what}: cannot reach the API server at {} (from the {}): {}",
            conn.server,
            conn.origin,
            chain(other)
        ),
    }
}

/// Every message of an error chain, each once, joined by `: `.
fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
