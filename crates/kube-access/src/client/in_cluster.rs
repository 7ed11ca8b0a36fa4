//! In-cluster configuration, as client-go's `rest.InClusterConfig`: the API server at
//! `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, trusting the service account's
//! `ca.crt`, authenticating with its `token`, in its `namespace`. The token file is read again
//! whenever it changes (the kubelet rotates projected tokens), not once at start.
//!
//! The service-account directory is `/var/run/secrets/kubernetes.io/serviceaccount`, or
//! `$VOLHEALTH_SERVICEACCOUNT_DIR` when set (for tests and unusual mounts).

use crate::error::{Error, Result};
use rustls::pki_types::pem::PemObject as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Where the kubelet mounts the service account's token, CA and namespace.
pub const SERVICEACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Environment variable naming another service-account directory.
pub const SERVICEACCOUNT_DIR_ENV: &str = "VOLHEALTH_SERVICEACCOUNT_DIR";

/// The service-account directory in use.
fn dir() -> PathBuf {
    std::env::var_os(SERVICEACCOUNT_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(SERVICEACCOUNT_DIR), PathBuf::from)
}

/// Whether this runs in a cluster: `KUBERNETES_SERVICE_HOST` is set.
pub(super) fn detected() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|h| !h.is_empty())
}

fn env(name: &str) -> Result<String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| Error::KubeConfig(format!("in-cluster configuration: {name} is not set")))
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        Error::KubeConfig(format!(
            "in-cluster configuration: reading {}: {e}",
            path.display()
        ))
    })
}

/// The configuration (without credentials) and the token file that authenticates it.
pub(super) fn config() -> Result<(kube::Config, TokenFile)> {
    let host = env("KUBERNETES_SERVICE_HOST")?;
    let port = env("KUBERNETES_SERVICE_PORT")?;
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let url: http::Uri = format!("https://{host}:{port}").parse().map_err(|e| {
        Error::KubeConfig(format!(
            "in-cluster configuration: https://{host}:{port} is not a URL: {e}"
        ))
    })?;
    let dir = dir();
    let ca_path = dir.join("ca.crt");
    let ca = read(&ca_path)?;
    let roots = rustls::pki_types::CertificateDer::pem_slice_iter(ca.as_bytes())
        .map(|c| c.map(|c| c.as_ref().to_vec()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::KubeConfig(format!(
                "in-cluster configuration: reading {}: {e}",
                ca_path.display()
            ))
        })?;
    let namespace = std::fs::read_to_string(dir.join("namespace"))
        .map(|n| n.trim().to_string())
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    let mut config = kube::Config::new(url);
    config.default_namespace = namespace;
    config.root_cert = Some(roots);
    let token = TokenFile::new(dir.join("token"));
    token.current()?;
    Ok((config, token))
}

/// The client for `config`, sending the current token of `token` with every request.
pub(super) fn client(config: kube::Config, token: TokenFile) -> Result<kube::Client> {
    let builder = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| Error::KubeConfig(format!("building the Kubernetes client: {e}")))?;
    let layer =
        tower::util::MapRequestLayer::new(move |mut req: http::Request<kube::client::Body>| {
            match token.header() {
                Ok(value) => {
                    req.headers_mut().insert(http::header::AUTHORIZATION, value);
                }
                // Sent without credentials, the request gets a 401 that says what is wrong;
                // the log says why.
                Err(e) => tracing::warn!(error = %e, "no service account token"),
            }
            req
        });
    Ok(builder.with_layer(&layer).build())
}

/// A token file, read again when its modification time, length or inode changes.
#[derive(Clone)]
pub(super) struct TokenFile {
    path: PathBuf,
    cached: Arc<Mutex<Option<Cached>>>,
}

struct Cached {
    stamp: (Option<SystemTime>, u64, u64),
    header: http::HeaderValue,
}

/// Shows the path only: the token is a credential.
impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TokenFile {
    fn new(path: PathBuf) -> TokenFile {
        TokenFile {
            path,
            cached: Arc::new(Mutex::new(None)),
        }
    }

    /// Checks that the token can be read now.
    fn current(&self) -> Result<()> {
        self.header().map(|_| ())
    }

    /// The `Authorization` header of the current token.
    fn header(&self) -> Result<http::HeaderValue> {
        let meta = std::fs::metadata(&self.path).map_err(|e| {
            Error::KubeConfig(format!(
                "reading the token file {}: {e}",
                self.path.display()
            ))
        })?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        let stamp = (meta.modified().ok(), meta.len(), inode);
        let mut cached = self
            .cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = cached.as_ref().filter(|c| c.stamp == stamp) {
            return Ok(c.header.clone());
        }
        let token = read(&self.path)?;
        let token = token.trim();
        if token.is_empty() {
            return Err(Error::KubeConfig(format!(
                "the token file {} is empty",
                self.path.display()
            )));
        }
        let mut header = http::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            Error::KubeConfig(format!(
                "the token in {} is not a valid header value",
                self.path.display()
            ))
        })?;
        header.set_sensitive(true);
        *cached = Some(Cached {
            stamp,
            header: header.clone(),
        });
        Ok(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_token_file_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "first\n").unwrap();
        let token = TokenFile::new(path.clone());
        assert_eq!(token.header().unwrap(), "Bearer first");
        std::fs::write(&path, "second-token\n").unwrap();
        assert_eq!(token.header().unwrap(), "Bearer second-token");
        assert!(!format!("{token:?}").contains("second"));
        std::fs::write(&path, "\n").unwrap();
        assert!(token.header().is_err());
    }
}
