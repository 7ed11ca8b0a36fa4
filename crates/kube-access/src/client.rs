//! Loading the Kubernetes client, with one precedence for every component:
//!
//! 1. a kubeconfig named explicitly: `--kubeconfig FILE`, else the `KUBECONFIG` variable (a
//!    list of files is merged, as kubectl merges it);
//! 2. else, in a cluster (`KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` set, as
//!    client-go decides), the service account, loaded as kube's `Config::incluster()` loads it
//!    (see [`in_cluster`]): its CA is re-read when rotated, its token too;
//! 3. else the default kubeconfig, `~/.kube/config`.
//!
//! A kubeconfig context asked for by name (`volhealth status --context`) only exists in a
//! kubeconfig, so with one the in-cluster step is skipped. [`choose`] is the rule itself, free of
//! the environment, so it is tested case by case.

pub mod in_cluster;

use crate::error::{Error, Result};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where the configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The kubeconfig file given with `--kubeconfig`.
    Explicit(PathBuf),
    /// The kubeconfig file(s) in `KUBECONFIG`.
    KubeconfigEnv(OsString),
    /// The pod's service account.
    InCluster,
    /// `~/.kube/config`.
    DefaultKubeconfig,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Explicit(p) => write!(f, "kubeconfig {}", p.display()),
            Source::KubeconfigEnv(v) => write!(f, "kubeconfig KUBECONFIG={}", v.to_string_lossy()),
            Source::InCluster => f.write_str("in-cluster service account"),
            Source::DefaultKubeconfig => f.write_str("kubeconfig ~/.kube/config"),
        }
    }
}

/// What the environment says, as [`choose`] reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// `KUBECONFIG`, when set and not empty.
    pub kubeconfig: Option<OsString>,
    /// Whether `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` are both set.
    pub in_cluster: bool,
}

impl Environment {
    /// This process's environment.
    pub fn current() -> Environment {
        Environment {
            kubeconfig: std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()),
            in_cluster: in_cluster::detected(),
        }
    }
}

/// The precedence: `explicit` (`--kubeconfig`), else `KUBECONFIG`, else in-cluster (unless a
/// kubeconfig `context` is asked for), else `~/.kube/config`.
pub fn choose(explicit: Option<&Path>, context: Option<&str>, env: &Environment) -> Source {
    if let Some(path) = explicit {
        return Source::Explicit(path.to_path_buf());
    }
    if let Some(v) = &env.kubeconfig {
        return Source::KubeconfigEnv(v.clone());
    }
    if env.in_cluster && context.is_none() {
        return Source::InCluster;
    }
    Source::DefaultKubeconfig
}

/// A loaded configuration, still to be turned into a client (a caller may set timeouts or
/// impersonation on [`LoadedConfig::config`] first).
pub struct LoadedConfig {
    /// kube's configuration.
    pub config: kube::Config,
    /// Where it came from.
    pub source: Source,
    /// The kubeconfig user of the current context, when a kubeconfig was read.
    pub kubeconfig_user: Option<String>,
    /// In-cluster: the token sent with every request, re-read when the kubelet rotates it.
    token: Option<in_cluster::TokenFile>,
}

/// A loaded client and what the configuration said besides.
pub struct LoadedClient {
    /// The client.
    pub client: kube::Client,
    /// The configuration's default namespace.
    pub default_namespace: String,
    /// The kubeconfig user of the current context, when a kubeconfig file was read.
    pub kubeconfig_user: Option<String>,
    /// Where the configuration came from.
    pub source: Source,
}

impl LoadedConfig {
    /// Builds the client.
    pub fn into_client(self) -> Result<LoadedClient> {
        let default_namespace = self.config.default_namespace.clone();
        let client = match self.token {
            Some(token) => in_cluster::client(self.config, token)?,
            None => kube::Client::try_from(self.config).map_err(Error::Build)?,
        };
        Ok(LoadedClient {
            client,
            default_namespace,
            kubeconfig_user: self.kubeconfig_user,
            source: self.source,
        })
    }
}

/// Loads the configuration by the precedence above, using kubeconfig `context` when given
/// (else the current context).
pub async fn load_config(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<LoadedConfig> {
    let source = choose(kubeconfig, context, &Environment::current());
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let kc = match &source {
        Source::InCluster => {
            let (config, token) = in_cluster::config()?;
            return Ok(LoadedConfig {
                config,
                source,
                kubeconfig_user: None,
                token: Some(token),
            });
        }
        Source::Explicit(path) => {
            Kubeconfig::read_from(path).map_err(|source| Error::ReadKubeconfig {
                path: path.clone(),
                source,
            })?
        }
        // `read` takes KUBECONFIG when set, else the default path: the two sources left.
        Source::KubeconfigEnv(_) => Kubeconfig::read().map_err(|e| Error::UseKubeconfig {
            origin: source.to_string(),
            source: e,
        })?,
        Source::DefaultKubeconfig => Kubeconfig::read().map_err(|e| Error::NoKubeconfig {
            origin: source.to_string(),
            source: e,
        })?,
    };
    let user = match context {
        Some(c) => user_of(&kc, c),
        None => current_user(&kc),
    };
    let config = kube::Config::from_custom_kubeconfig(kc, &options)
        .await
        .map_err(|e| Error::UseKubeconfig {
            origin: source.to_string(),
            source: e,
        })?;
    Ok(LoadedConfig {
        config,
        source,
        kubeconfig_user: user,
        token: None,
    })
}

/// Loads the configuration from `kubeconfig`, else by the precedence above, and builds a client.
pub async fn load(kubeconfig: Option<&Path>) -> Result<LoadedClient> {
    load_with_retry(kubeconfig, true).await
}

/// [`load`], choosing whether kube retries 429, 503 and 504 answers itself (`retry`); a caller
/// that must see a 429 (an eviction a PodDisruptionBudget refuses) turns it off.
pub async fn load_with_retry(kubeconfig: Option<&Path>, retry: bool) -> Result<LoadedClient> {
    let mut loaded = load_config(kubeconfig, None).await?;
    loaded.config.default_retry = retry;
    loaded.into_client()
}

/// The user named by the current context of `kc`.
pub fn current_user(kc: &Kubeconfig) -> Option<String> {
    user_of(kc, kc.current_context.as_deref().unwrap_or_default())
}

/// The user named by context `context` of `kc`.
fn user_of(kc: &Kubeconfig, context: &str) -> Option<String> {
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
        assert_eq!(user_of(&kc, "d").as_deref(), Some("other"));
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_says_which_file() {
        let err = load(Some(Path::new("/nonexistent/kubeconfig")))
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[test]
    fn the_precedence_is_explicit_then_kubeconfig_env_then_in_cluster_then_default() {
        let explicit = Path::new("/etc/volhealth/kubeconfig");
        let everything = Environment {
            kubeconfig: Some("/home/u/other-config".into()),
            in_cluster: true,
        };
        assert_eq!(
            choose(Some(explicit), None, &everything),
            Source::Explicit(explicit.into())
        );
        assert_eq!(
            choose(None, None, &everything),
            Source::KubeconfigEnv("/home/u/other-config".into()),
            "KUBECONFIG names a file explicitly, so it wins over the service account"
        );
        let in_pod = Environment {
            kubeconfig: None,
            in_cluster: true,
        };
        assert_eq!(choose(None, None, &in_pod), Source::InCluster);
        assert_eq!(
            choose(None, Some("prod"), &in_pod),
            Source::DefaultKubeconfig,
            "a named context exists only in a kubeconfig"
        );
        assert_eq!(
            choose(None, None, &Environment::default()),
            Source::DefaultKubeconfig
        );
    }
}
