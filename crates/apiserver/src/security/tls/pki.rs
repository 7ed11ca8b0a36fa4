//! The certificate authority and serving certificate the server keeps in `<data-dir>/pki`, and
//! client certificates issued by that authority.
//!
//! ```text
//! <data-dir>/pki/ca.crt          the CA certificate (clients trust it; client certificates chain to it)
//! <data-dir>/pki/ca.key          its key (0600)
//! <data-dir>/pki/apiserver.crt   the serving certificate, signed by the CA
//! <data-dir>/pki/apiserver.key   its key (0600)
//! ```
//!
//! Everything is made on first use and reused afterwards. The serving certificate is made again,
//! with the same CA, when it no longer covers the requested names, no longer chains to the CA, or
//! expires within [`RENEW_BEFORE_DAYS`].

use crate::errors::{Error, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime, pem::PemObject};
use std::path::{Path, PathBuf};

/// Common name of the generated certificate authority.
pub const CA_NAME: &str = "volhealth-ca";
/// Validity of the generated CA, in days.
const CA_DAYS: i64 = 3650;
/// Validity of serving and client certificates, in days.
const LEAF_DAYS: i64 = 365;
/// A serving certificate that expires within this many days is made again.
pub const RENEW_BEFORE_DAYS: i64 = 30;
/// Names every generated serving certificate covers.
pub const DEFAULT_SANS: &[&str] = &["127.0.0.1", "::1", "localhost"];

/// Paths of the files in `<data-dir>/pki`.
#[derive(Debug, Clone)]
pub struct PkiPaths {
    /// The pki directory.
    pub dir: PathBuf,
}

impl PkiPaths {
    /// The pki directory of a server data directory.
    pub fn of_data_dir(data_dir: &Path) -> PkiPaths {
        PkiPaths {
            dir: data_dir.join("pki"),
        }
    }
    /// The CA certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
    /// The CA key.
    pub fn ca_key(&self) -> PathBuf {
        self.dir.join("ca.key")
    }
    /// The serving certificate.
    pub fn serving_cert(&self) -> PathBuf {
        self.dir.join("apiserver.crt")
    }
    /// The serving key.
    pub fn serving_key(&self) -> PathBuf {
        self.dir.join("apiserver.key")
    }
}

fn tls_err(what: impl Into<String>) -> impl FnOnce(rcgen::Error) -> Error {
    let what = what.into();
    move |e| Error::Tls {
        what,
        reason: e.to_string(),
    }
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { what, source }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(io_err(format!("reading {}", path.display())))
}

/// Writes `text` atomically; `private` files are readable by the owner only.
fn write(path: &Path, text: &str, private: bool) -> Result<()> {
    use std::io::Write as _;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.tmp.{}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(if private { 0o600 } else { 0o644 });
    }
    let mut file = options
        .open(&tmp)
        .map_err(io_err(format!("creating {}", tmp.display())))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err(format!("writing {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(io_err(format!(
        "renaming {} to {}",
        tmp.display(),
        path.display()
    )))
}

/// Validity from a day ago (clock skew) to `days` from now.
fn validity(params: &mut CertificateParams, days: i64) -> Result<()> {
    let date = |offset: i64| -> Result<(i32, u8, u8)> {
        let d = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_hours(offset * 24))
            .map_err(|e| Error::Tls {
                what: "computing a certificate's validity".into(),
                reason: e.to_string(),
            })?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date();
        Ok((i32::from(d.year()), d.month() as u8, d.day() as u8))
    };
    let (y, m, d) = date(-1)?;
    params.not_before = rcgen::date_time_ymd(y, m, d);
    let (y, m, d) = date(days)?;
    params.not_after = rcgen::date_time_ymd(y, m, d);
    Ok(())
}

/// The CA's parameters; the same every time, so that a CA read back from disk signs as it did.
fn ca_params() -> Result<CertificateParams> {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// The CA of `<data-dir>/pki`: its certificate (PEM) and a signer.
pub struct Ca {
    /// The CA certificate, PEM.
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// Never shows the key.
impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// Reads the CA of `paths`, or creates it when neither its certificate nor its key exists.
    pub fn load_or_create(paths: &PkiPaths) -> Result<Ca> {
        let (cert, key) = (paths.ca_cert(), paths.ca_key());
        if cert.exists() || key.exists() {
            return Ca::load(paths);
        }
        create_dir(&paths.dir)?;
        let key_pair = KeyPair::generate().map_err(tls_err("generating the CA key"))?;
        let mut params = ca_params()?;
        validity(&mut params, CA_DAYS)?;
        let cert_pem = params
            .self_signed(&key_pair)
            .map_err(tls_err("signing the CA certificate"))?
            .pem();
        write(&key, &key_pair.serialize_pem(), true)?;
        write(&cert, &cert_pem, false)?;
        tracing::info!("created a certificate authority in {}", paths.dir.display());
        Ok(Ca {
            cert_pem,
            issuer: Issuer::new(ca_params()?, key_pair),
        })
    }

    /// Reads the CA of `paths`.
    pub fn load(paths: &PkiPaths) -> Result<Ca> {
        let cert_pem = read(&paths.ca_cert())?;
        let key_pem = read(&paths.ca_key())?;
        let key_pair = KeyPair::from_pem(&key_pem).map_err(tls_err(format!(
            "reading the CA key {}",
            paths.ca_key().display()
        )))?;
        Ok(Ca {
            cert_pem,
            issuer: Issuer::new(ca_params()?, key_pair),
        })
    }

    /// A certificate for `params` with a new key, signed by this CA: (certificate PEM, key PEM).
    fn issue(&self, mut params: CertificateParams, what: &str) -> Result<(String, String)> {
        validity(&mut params, LEAF_DAYS)?;
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(tls_err(format!("generating the key of {what}")))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(tls_err(format!("signing {what}")))?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

fn create_dir(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(io_err(format!("creating {}", dir.display())))
}

/// A SAN for `name`: an IP address when it parses as one, else a DNS name.
fn san(name: &str) -> Result<SanType> {
    Ok(match name.parse::<std::net::IpAddr>() {
        Ok(ip) => SanType::IpAddress(ip),
        Err(_) => SanType::DnsName(
            name.try_into()
                .map_err(tls_err(format!("using --tls-san {name:?}")))?,
        ),
    })
}

/// Whether `cert_pem` chains to `ca_pem`, covers every name of `sans`, and stays valid for
/// [`RENEW_BEFORE_DAYS`] more days.
fn serving_cert_fits(cert_pem: &str, ca_pem: &str, sans: &[String]) -> bool {
    let (Ok(cert), Ok(ca)) = (
        CertificateDer::from_pem_slice(cert_pem.as_bytes()),
        CertificateDer::from_pem_slice(ca_pem.as_bytes()),
    ) else {
        return false;
    };
    let Ok(anchor) = webpki::anchor_from_trusted_cert(&ca) else {
        return false;
    };
    let Ok(end) = webpki::EndEntityCert::try_from(&cert) else {
        return false;
    };
    let later = std::time::SystemTime::now()
        + std::time::Duration::from_secs(RENEW_BEFORE_DAYS.unsigned_abs() * 86_400);
    let Ok(since) = later.duration_since(std::time::UNIX_EPOCH) else {
        return false;
    };
    let chains = end
        .verify_for_usage(
            rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .all,
            &[anchor],
            &[],
            UnixTime::since_unix_epoch(since),
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .is_ok();
    chains
        && sans.iter().all(|name| {
            ServerName::try_from(name.as_str())
                .is_ok_and(|n| end.verify_is_valid_for_subject_name(&n).is_ok())
        })
}

/// The serving pair in `paths`, made (again) when missing or no longer fitting: (certificate
/// PEM, key PEM). `extra_sans` come on top of [`DEFAULT_SANS`].
pub fn serving_pair(paths: &PkiPaths, ca: &Ca, extra_sans: &[String]) -> Result<(String, String)> {
    let mut sans: Vec<String> = DEFAULT_SANS.iter().map(|s| s.to_string()).collect();
    for s in extra_sans {
        if !sans.contains(s) {
            sans.push(s.clone());
        }
    }
    let (cert, key) = (paths.serving_cert(), paths.serving_key());
    if cert.exists() && key.exists() {
        let cert_pem = read(&cert)?;
        if serving_cert_fits(&cert_pem, &ca.cert_pem, &sans) {
            return Ok((cert_pem, read(&key)?));
        }
        tracing::info!(
            "the serving certificate {} does not cover {sans:?} or is about to expire; making a new one",
            cert.display()
        );
    }
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "volhealth-apiserver");
    params.subject_alt_names = sans.iter().map(|s| san(s)).collect::<Result<_>>()?;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let (cert_pem, key_pem) = ca.issue(params, "the serving certificate")?;
    create_dir(&paths.dir)?;
    write(&key, &key_pem, true)?;
    write(&cert, &cert_pem, false)?;
    Ok((cert_pem, key_pem))
}

/// A client certificate and its key, with the CA that signed it.
#[derive(Clone)]
pub struct ClientCert {
    /// The client certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM (a secret).
    pub key_pem: String,
    /// The signing CA's certificate, PEM.
    pub ca_pem: String,
}

/// Never shows the key.
impl std::fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCert")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// Issues a client certificate for `user` (its CN) in `groups` (one O each, at most two), signed
/// by the CA in `<data_dir>/pki` (created when missing), as kube-apiserver's x509 authenticator
/// reads it.
pub fn issue_client_cert(data_dir: &Path, user: &str, groups: &[&str]) -> Result<ClientCert> {
    let ca = Ca::load_or_create(&PkiPaths::of_data_dir(data_dir))?;
    ca.client_cert(user, groups)
}

impl Ca {
    /// A client certificate for `user` in `groups`, signed by this CA.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<ClientCert> {
        // rcgen keeps one value per attribute type: the second O goes in under its OID spelled
        // out, which is a distinct key to rcgen and the same attribute to every reader.
        let o_types = [
            DnType::OrganizationName,
            DnType::CustomDnType(vec![2, 5, 4, 10]),
        ];
        if groups.len() > o_types.len() {
            return Err(Error::Tls {
                what: format!("issuing the client certificate of {user}"),
                reason: format!("at most {} groups are supported", o_types.len()),
            });
        }
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        for (group, ty) in groups.iter().zip(o_types) {
            params.distinguished_name.push(ty, *group);
        }
        params.distinguished_name.push(DnType::CommonName, user);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let (cert_pem, key_pem) =
            self.issue(params, &format!("the client certificate of {user}"))?;
        Ok(ClientCert {
            cert_pem,
            key_pem,
            ca_pem: self.cert_pem.clone(),
        })
    }
}

/// Reads a PEM private key (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(pem: &str, what: &str) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| Error::Tls {
        what: format!("reading the private key {what}"),
        reason: e.to_string(),
    })
}

/// Reads every certificate of a PEM text.
pub fn certificates(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls {
            what: format!("reading the certificates {what}"),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(Error::Tls {
            what: format!("reading the certificates {what}"),
            reason: "no PEM certificate found".into(),
        });
    }
    Ok(certs)
}
