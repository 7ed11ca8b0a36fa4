//! TLS for the API server: the serving certificate (given, or made and kept in
//! `<data-dir>/pki`), HTTP/2 and HTTP/1.1 over ALPN as kube-apiserver offers them, and optional
//! client certificates verified against the client CA, which authenticate as kube-apiserver's
//! x509 authenticator does: CN is the user, each O a group.

mod pki;
mod subject;

pub use pki::{CA_NAME, Ca, ClientCert, DEFAULT_SANS, PkiPaths, issue_client_cert};
pub use subject::{Subject, subject};

use crate::errors::{Error, Result};
use crate::security::authz::User;
use rustls::pki_types::CertificateDer;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The group every authenticated user is in.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// How the server does TLS (kube-apiserver's flag names in brackets).
#[derive(Debug, Clone, Default)]
pub struct TlsConfig {
    /// The serving certificate chain, PEM [`--tls-cert-file`]; None: made in `<data-dir>/pki`.
    pub cert_file: Option<PathBuf>,
    /// The serving key, PEM [`--tls-private-key-file`]; set together with `cert_file`.
    pub key_file: Option<PathBuf>,
    /// CAs that sign client certificates [`--client-ca-file`]; None: the CA in `<data-dir>/pki`.
    pub client_ca_file: Option<PathBuf>,
    /// Names (IP addresses or DNS names) the made serving certificate covers besides
    /// 127.0.0.1, ::1 and localhost [`--tls-san`].
    pub sans: Vec<String>,
}

/// What serving with TLS needs, ready for the accept loop.
#[derive(Clone)]
pub(crate) struct Serving {
    /// Does the handshakes.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// What clients should trust, PEM (written into kubeconfigs as certificate-authority-data).
    pub trust_pem: String,
}

fn tls_err(what: impl Into<String>, reason: impl std::fmt::Display) -> Error {
    Error::Tls {
        what: what.into(),
        reason: reason.to_string(),
    }
}

fn read(path: &Path, what: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        what: format!("reading {what} {}", path.display()),
        source,
    })
}

/// The PEM text of the last certificate in `chain` (the root, when the chain includes it).
fn last_certificate_pem(chain: &[CertificateDer<'_>]) -> String {
    let Some(last) = chain.last() else {
        return String::new();
    };
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(last.as_ref());
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// Reads or makes the certificates of `config` for a server whose data lives in `data_dir`.
pub(crate) fn prepare(data_dir: &Path, config: &TlsConfig) -> Result<Serving> {
    let paths = PkiPaths::of_data_dir(data_dir);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (chain, key, trust_pem) = match (&config.cert_file, &config.key_file) {
        (Some(cert), Some(key)) => {
            let chain = pki::certificates(&read(cert, "--tls-cert-file")?, "of --tls-cert-file")?;
            let key = pki::private_key(
                &read(key, "--tls-private-key-file")?,
                "of --tls-private-key-file",
            )?;
            let trust = last_certificate_pem(&chain);
            (chain, key, trust)
        }
        (None, None) => {
            let ca = Ca::load_or_create(&paths)?;
            let (cert_pem, key_pem) = pki::serving_pair(&paths, &ca, &config.sans)?;
            let chain = pki::certificates(&cert_pem, "of the serving certificate")?;
            let key = pki::private_key(&key_pem, "of the serving certificate")?;
            (chain, key, ca.cert_pem)
        }
        _ => {
            return Err(tls_err(
                "reading the serving certificate",
                "--tls-cert-file and --tls-private-key-file go together",
            ));
        }
    };
    let client_ca_pem = match &config.client_ca_file {
        Some(path) => read(path, "--client-ca-file")?,
        None => Ca::load_or_create(&paths)?.cert_pem,
    };
    let mut roots = rustls::RootCertStore::empty();
    for ca in pki::certificates(&client_ca_pem, "of the client CA")? {
        roots
            .add(ca)
            .map_err(|e| tls_err("adding a client CA certificate", e))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| tls_err("setting up client certificate verification", e))?;
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("choosing the TLS versions", e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| tls_err("using the serving certificate", e))?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Serving {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
        trust_pem,
    })
}

/// The user a verified client certificate chain stands for: CN the name, each O a group, plus
/// `system:authenticated`. None without a certificate or without a common name.
pub fn client_user(chain: Option<&[CertificateDer<'_>]>) -> Option<User> {
    let leaf = chain?.first()?;
    let subject = subject(leaf.as_ref())?;
    let name = subject.common_name.filter(|n| !n.is_empty())?;
    let mut groups = subject.organizations;
    if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
        groups.push(AUTHENTICATED_GROUP.to_string());
    }
    Some(User {
        name,
        uid: String::new(),
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_certificate_is_its_subject() {
        let dir = tempfile::tempdir().unwrap();
        let cert = issue_client_cert(dir.path(), "system:node:a", &["system:nodes"]).unwrap();
        let chain = pki::certificates(&cert.cert_pem, "test").unwrap();
        let user = client_user(Some(&chain)).unwrap();
        assert_eq!(user.name, "system:node:a");
        assert_eq!(user.groups, ["system:nodes", AUTHENTICATED_GROUP]);
        assert_eq!(user.node_name(), Some("a"));
        assert!(!format!("{cert:?}").contains("PRIVATE KEY"));
        assert_eq!(client_user(None), None);
        let two = issue_client_cert(dir.path(), "u", &["g1", "g2"]).unwrap();
        let chain = pki::certificates(&two.cert_pem, "test").unwrap();
        assert_eq!(
            client_user(Some(&chain)).unwrap().groups,
            ["g1", "g2", AUTHENTICATED_GROUP]
        );
        assert!(issue_client_cert(dir.path(), "u", &["a", "b", "c"]).is_err());
    }
}
