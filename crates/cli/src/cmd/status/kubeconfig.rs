//! Connecting to the API server as every volhealth component does: `--kubeconfig`, then
//! `KUBECONFIG`, then the in-cluster service account, then `~/.kube/config`
//! (`volhealth_kube_access::client`), with the CLI's timeouts and impersonation on top.

use anyhow::Context as _;
use std::path::Path;
use std::time::Duration;
use volhealth_kube_access::{Error, client};

/// A connected client and what the user needs to know when it fails.
pub struct Connection {
    /// The client.
    pub client: kube::Client,
    /// The server URL, for error messages.
    pub server: String,
    /// The namespace of the current context (`default` when unset).
    pub default_namespace: String,
    /// Where the configuration came from, for error messages.
    pub origin: String,
}

/// Whom to act as (kubectl's `--as` and `--as-group`): the API server checks that the
/// identity of the kubeconfig may impersonate them.
#[derive(Debug, Clone, Default)]
pub struct Impersonation {
    /// The user to act as.
    pub user: Option<String>,
    /// The groups to act as (with `user`).
    pub groups: Vec<String>,
}

/// Builds a client acting as `who` when it names someone. `timeout` bounds connecting and,
/// unless `streaming`, each response (a watch may rightly stay silent for minutes, so it gets no
/// read timeout). The configuration is found as every volhealth component finds it
/// (`volhealth_kube_access::client`): `--kubeconfig`, then `KUBECONFIG`, then the in-cluster
/// service account, then `~/.kube/config`.
pub async fn connect_as(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    timeout: Duration,
    streaming: bool,
    who: &Impersonation,
) -> anyhow::Result<Connection> {
    let mut loaded = client::load_config(kubeconfig, context)
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
    if let Some(user) = &who.user {
        config.auth_info.impersonate = Some(user.clone());
        if !who.groups.is_empty() {
            config.auth_info.impersonate_groups = Some(who.groups.clone());
        }
    }
    config.connect_timeout = Some(timeout);
    config.read_timeout = if streaming { None } else { Some(timeout) };
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
        default_namespace: loaded.default_namespace,
        origin,
    })
}

/// The innermost message of an error chain: the cause itself, without the layers that
/// wrap it (which often repeat it).
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    inner.to_string()
}

/// Explains a failed API call: unreachable, refused credentials, or another API error.
pub fn explain(err: &kube::Error, what: &str, conn: &Connection) -> anyhow::Error {
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
