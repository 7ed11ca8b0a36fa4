//! Writing a kubeconfig that points at this server.

use crate::errors::{Error, Result};
use crate::security::tls::ClientCert;
use base64::Engine as _;
use std::path::Path;

/// What a kubeconfig for this server holds: where it is, what to trust, who the user is.
#[derive(Clone, Default)]
pub struct Kubeconfig {
    /// The server URL, `https://HOST:PORT` (or `http://` for a plain HTTP server).
    pub server: String,
    /// The CA certificate(s) to trust, PEM (`certificate-authority-data`).
    pub ca_pem: Option<String>,
    /// A bearer token (a secret).
    pub token: Option<String>,
    /// A client certificate and key (`client-certificate-data`, `client-key-data`).
    pub client_cert: Option<ClientCert>,
}

/// Shows the server and which credentials there are, never the credentials.
impl std::fmt::Debug for Kubeconfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubeconfig")
            .field("server", &self.server)
            .field("ca", &self.ca_pem.is_some())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field(
                "client_cert",
                &self.client_cert.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl Kubeconfig {
    /// A kubeconfig for `server` with `ca_pem` to trust and the client certificate `cert` (whose
    /// CA is used when `ca_pem` is None).
    pub fn with_client_cert(server: &str, ca_pem: Option<&str>, cert: ClientCert) -> Kubeconfig {
        Kubeconfig {
            server: server.to_string(),
            ca_pem: Some(ca_pem.map_or_else(|| cert.ca_pem.clone(), str::to_string)),
            token: None,
            client_cert: Some(cert),
        }
    }

    /// A kubeconfig for `server` with `ca_pem` to trust and the bearer token `token`.
    pub fn with_token(server: &str, ca_pem: Option<&str>, token: &str) -> Kubeconfig {
        Kubeconfig {
            server: server.to_string(),
            ca_pem: ca_pem.map(str::to_string),
            token: Some(token.to_string()),
            client_cert: None,
        }
    }
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The kubeconfig text of `kc`.
pub fn render(kc: &Kubeconfig) -> String {
    let mut user = String::new();
    if let Some(t) = &kc.token {
        user.push_str(&format!("    token: {}\n", quoted(t)));
    }
    if let Some(c) = &kc.client_cert {
        user.push_str(&format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(&c.cert_pem),
            b64(&c.key_pem)
        ));
    }
    if user.is_empty() {
        user.push_str("    {}\n");
    }
    let ca = kc
        .ca_pem
        .as_ref()
        .map(|pem| format!("    certificate-authority-data: {}\n", b64(pem)))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: volhealth\n  cluster:\n    server: {}\n{ca}contexts:\n- name: volhealth\n  context:\n    cluster: volhealth\n    namespace: default\n    user: volhealth\ncurrent-context: volhealth\npreferences: {{}}\nusers:\n- name: volhealth\n  user:\n{user}",
        kc.server
    )
}

/// Writes the kubeconfig atomically (temporary file in the same directory, then rename), so a
/// reader never sees a partial file; only the owner may read it.
pub fn write(path: &Path, kc: &Kubeconfig) -> Result<()> {
    let io = |what: String| move |source| Error::Io { what, source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "kubeconfig".into());
    let tmp = path.with_file_name(format!(".{file_name}.tmp.{}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let written = options.open(&tmp).and_then(|mut f| {
        use std::io::Write as _;
        f.write_all(render(kc).as_bytes())
    });
    written.map_err(io(format!("writing {}", tmp.display())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
            .map_err(io(format!("setting permissions of {}", tmp.display())))?;
    }
    std::fs::rename(&tmp, path).map_err(io(format!(
        "renaming {} to {}",
        tmp.display(),
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(v: &serde_json::Value) -> String {
        let b = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap();
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn renders_server_ca_and_token() {
        let t = render(&Kubeconfig::with_token(
            "https://127.0.0.1:1234",
            Some("CA PEM"),
            "abc",
        ));
        assert!(t.contains("    server: https://127.0.0.1:1234\n"));
        assert!(t.contains("token: \"abc\""));
        let parsed: serde_json::Value = serde_saphyr::from_str(&t).unwrap();
        assert_eq!(parsed["users"][0]["user"]["token"], "abc");
        assert_eq!(
            decoded(&parsed["clusters"][0]["cluster"]["certificate-authority-data"]),
            "CA PEM"
        );
        let anon: serde_json::Value = serde_saphyr::from_str(&render(&Kubeconfig {
            server: "http://x".into(),
            ..Kubeconfig::default()
        }))
        .unwrap();
        assert!(anon["users"][0]["user"].is_object());
        assert!(anon["clusters"][0]["cluster"]["certificate-authority-data"].is_null());
    }

    #[test]
    fn renders_a_client_certificate_and_debug_hides_it() {
        let cert = ClientCert {
            cert_pem: "CERT".into(),
            key_pem: "KEY".into(),
            ca_pem: "CA".into(),
        };
        let kc = Kubeconfig::with_client_cert("https://h:1", None, cert);
        let parsed: serde_json::Value = serde_saphyr::from_str(&render(&kc)).unwrap();
        let user = &parsed["users"][0]["user"];
        assert_eq!(decoded(&user["client-certificate-data"]), "CERT");
        assert_eq!(decoded(&user["client-key-data"]), "KEY");
        assert_eq!(
            decoded(&parsed["clusters"][0]["cluster"]["certificate-authority-data"]),
            "CA"
        );
        let shown = format!("{kc:?}");
        assert!(!shown.contains("KEY") && !shown.contains("CERT"), "{shown}");
    }
}
