//! In-cluster configuration, as client-go's `rest.InClusterConfig` and kube's
//! `Config::incluster()`: the API server at `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`,
//! trusting the service account's `ca.crt`, authenticating with its `token`, in its `namespace`.
//!
//! In the service account's own directory (`/var/run/secrets/kubernetes.io/serviceaccount`, the
//! one kube reads) the configuration is kube's `Config::incluster()` itself. kube re-reads
//! `ca.crt` about every minute (its verifier follows `root_cert_file`), so a rotated cluster CA
//! is trusted without a restart. The token is sent by a layer here that reads the file again
//! whenever it changes (kube would re-read it at most a minute late; the kubelet keeps the old
//! token valid meanwhile, but the change is then visible on the very next request).
//!
//! `$VOLHEALTH_SERVICEACCOUNT_DIR` names another directory (for tests and unusual mounts), which
//! kube cannot be pointed at: the configuration is then built the same way from that directory,
//! `root_cert_file` included.

use crate::error::{Error, Result};
use rustls::pki_types::pem::PemObject as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Where the kubelet mounts the service account's token, CA and namespace.
pub const SERVICEACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Environment variable naming another service-account directory.
pub const SERVICEACCOUNT_DIR_ENV: &str = "VOLHEALTH_SERVICEACCOUNT_DIR";

/// The service-account directory named by [`SERVICEACCOUNT_DIR_ENV`], when it names one.
fn override_dir() -> Option<PathBuf> {
    std::env::var_os(SERVICEACCOUNT_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Whether this runs in a cluster: `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` are
/// both set (client-go's test; kube's `Config::incluster()` needs both too).
pub(crate) fn detected() -> bool {
    ["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"]
        .iter()
        .all(|v| std::env::var_os(v).is_some_and(|h| !h.is_empty()))
}

fn env(name: &'static str) -> Result<String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(Error::InClusterEnv { name })
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::ReadServiceAccount {
        path: path.to_path_buf(),
        source,
    })
}

/// The configuration (without credentials) and the token file that authenticates it.
pub(crate) fn config() -> Result<(kube::Config, TokenFile)> {
    let Some(dir) = override_dir() else {
        let mut config = kube::Config::incluster().map_err(Error::InCluster)?;
        // The token goes through [`TokenFile`] instead, read again on every change.
        let path = config.auth_info.token_file.take().map_or_else(
            || Path::new(SERVICEACCOUNT_DIR).join("token"),
            PathBuf::from,
        );
        config.default_namespace = config.default_namespace.trim().to_string();
        let token = TokenFile::new(path);
        token.current()?;
        return Ok((config, token));
    };
    let host = env("KUBERNETES_SERVICE_HOST")?;
    let port = env("KUBERNETES_SERVICE_PORT")?;
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let url = format!("https://{host}:{port}");
    let uri: http::Uri = url
        .parse()
        .map_err(|source| Error::InClusterUrl { url, source })?;
    let ca_path = dir.join("ca.crt");
    let ca = read(&ca_path)?;
    let roots = rustls::pki_types::CertificateDer::pem_slice_iter(ca.as_bytes())
        .map(|c| c.map(|c| c.as_ref().to_vec()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|source| Error::BadCa {
            path: ca_path.clone(),
            source,
        })?;
    let namespace = std::fs::read_to_string(dir.join("namespace"))
        .map(|n| n.trim().to_string())
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    let mut config = kube::Config::new(uri);
    config.default_namespace = namespace;
    config.root_cert = Some(roots);
    // As kube's in-cluster configuration: the CA file is re-read, so a rotated CA is trusted.
    config.root_cert_file = Some(ca_path);
    let token = TokenFile::new(dir.join("token"));
    token.current()?;
    Ok((config, token))
}

/// The client for `config`, sending the current token of `token` with every request.
pub(crate) fn client(config: kube::Config, token: TokenFile) -> Result<kube::Client> {
    let builder = kube::client::ClientBuilder::try_from(config).map_err(Error::Build)?;
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
pub(crate) struct TokenFile {
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
        let meta = std::fs::metadata(&self.path).map_err(|source| Error::ReadServiceAccount {
            path: self.path.clone(),
            source,
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
            return Err(Error::EmptyToken {
                path: self.path.clone(),
            });
        }
        let mut header = http::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            Error::BadToken {
                path: self.path.clone(),
            }
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
