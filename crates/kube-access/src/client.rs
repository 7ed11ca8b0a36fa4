//! The Kubernetes client both writers use: from `--kubeconfig` when given, else from
//! `KUBECONFIG`, else in-cluster (the service account, see [`in_cluster`]) when
//! `KUBERNETES_SERVICE_HOST` is set, else `~/.kube/config`.

mod in_cluster;

pub use in_cluster::{SERVICEACCOUNT_DIR, SERVICEACCOUNT_DIR_ENV};

use crate::error::{Error, Result};
use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use std::path::Path;

/// A loaded client and what the configuration said besides.
pub struct LoadedClient {
    /// The client.
    pub client: kube::Client,
    /// The configuration's default namespace.
    pub default_namespace: String,
    /// The kubeconfig user of the current context, when a kubeconfig file was read.
    pub kubeconfig_user: Option<String>,
}

/// Loads the configuration from `kubeconfig`, or infers it, and builds a client.
pub async fn load(kubeconfig: Option<&Path>) -> Result<LoadedClient> {
    load_with_retry(kubeconfig, true).await
}

/// [`load`], choosing whether kube retries 429, 503 and 504 answers itself (`retry`); a caller
/// that must see a 429 (an eviction a PodDisruptionBudget refuses) turns it off.
pub async fn load_with_retry(kubeconfig: Option<&Path>, retry: bool) -> Result<LoadedClient> {
    let (mut config, user) = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| Error::KubeConfig(format!("reading {}: {e}", path.display())))?;
            let user = current_user(&kc);
            let config = kube::Config::from_custom_kubeconfig(
                kc,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| Error::KubeConfig(format!("using {}: {e}", path.display())))?;
            (config, user)
        }
        None if std::env::var_os("KUBECONFIG").is_none() && in_cluster::detected() => {
            let (mut config, token) = in_cluster::config()?;
            config.default_retry = retry;
            let default_namespace = config.default_namespace.clone();
            return Ok(LoadedClient {
                client: in_cluster::client(config, token)?,
                default_namespace,
                kubeconfig_user: None,
            });
        }
        None => (
            kube::Config::infer()
                .await
                .map_err(|e| Error::KubeConfig(e.to_string()))?,
            None,
        ),
    };
    config.default_retry = retry;
    let default_namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config)
        .map_err(|e| Error::KubeConfig(format!("building the Kubernetes client: {e}")))?;
    Ok(LoadedClient {
        client,
        default_namespace,
        kubeconfig_user: user,
    })
}

/// Watches every object of `api` into a cache (without managedFields, which no writer reads),
/// retrying with backoff and logging failures as `what`; the watch runs until the runtime stops.
pub fn spawn_reflector<K>(api: Api<K>, what: &'static str) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .modify(|o: &mut K| o.meta_mut().managed_fields = None)
        .default_backoff();
    spawn_watch_loop(reflector::reflector(writer, stream), what, |_| {});
    store
}

/// Drives a watch `stream` on its own task until the runtime stops, handing each event to
/// `apply` and logging each failure as `what` (the stream retries with its backoff).
pub(crate) fn spawn_watch_loop<T, S>(
    stream: S,
    what: &'static str,
    mut apply: impl FnMut(T) + Send + 'static,
) where
    S: futures::Stream<Item = Result<T, watcher::Error>> + Send + 'static,
{
    let mut stream = Box::pin(stream);
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => apply(event),
                Err(e) => {
                    tracing::warn!(resource = what, error = %e, "watch failed; retrying with backoff");
                }
            }
        }
    });
}

/// The user named by the current context of `kc`.
pub fn current_user(kc: &kube::config::Kubeconfig) -> Option<String> {
    let context = kc.current_context.clone().unwrap_or_default();
    kc.contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_contexts_user() {
        let yaml = r#"
apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: "system:node:node-b"}}, {name: d, context: {cluster: k, user: other}}]
clusters: [{name: k, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: "system:node:node-b", user: {token: t}}]
"#;
        let kc = kube::config::Kubeconfig::from_yaml(yaml).unwrap();
        assert_eq!(current_user(&kc).as_deref(), Some("system:node:node-b"));
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_says_which_file() {
        let err = load(Some(Path::new("/nonexistent/kubeconfig")))
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }
}
