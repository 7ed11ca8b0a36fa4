//! The embedded API server in this process, on its own thread and runtime, on a loopback port
//! over a data directory of the test's: started from the `volhealth apiserver` flags a test
//! stands for, or as the worlds need it (TLS, a token file), and stopped through its shutdown
//! future, or for an outage after which it comes back on the same address.

use crate::captured_log::CapturedLog;
use crate::http::http_get_ok;
use crate::kube_client::client_for;
use crate::service::{Failure, Service, ServiceError};
use crate::wait::{wait_for, wait_for_blocking};
use std::path::{Path, PathBuf};
use std::time::Duration;
use volhealth_apiserver::authz::{Authorizer, Tokens};
use volhealth_apiserver::{FeatureGates, ServerConfig, TlsConfig};

/// How long a starting server may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopping server may take to finish open requests before it is stopped anyway.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The authorizer chain of servers started without `--authorization-mode`: most tests speak as
/// `system:anonymous` or as tokens without any roles, and are about other things than RBAC;
/// node scoping stays on. (The server's own default is `Node,RBAC`.)
pub const TESTS_AUTHORIZATION_MODE: &str = "Node,AlwaysAllow";

/// A running in-process API server; dropping it shuts it down.
pub struct ApiServer {
    /// The admin kubeconfig it wrote (with the token file's first token, when tokens are on).
    pub kubeconfig: PathBuf,
    /// Where it listens, e.g. `http://127.0.0.1:40123` (`https://` over TLS).
    pub url: String,
    config: ServerConfig,
    addr: std::net::SocketAddr,
    service: Service,
}

/// A `ServerConfig` from the `volhealth apiserver` flags the tests use (`--feature-gates`,
/// `--token-auth-file`, `--anonymous-admin`, `--authorization-mode`, `--retained-changes`,
/// `--bookmark-interval-seconds`, and the TLS ones: `--tls-san`, `--client-ca-file`,
/// `--tls-cert-file`, `--tls-private-key-file`), with data in `<dir>/data` and the kubeconfig at
/// `<dir>/kubeconfig`, so a test reads the same as the command line it stands for. It serves
/// plain HTTP (as with `--insecure-http`) unless a TLS flag is given or [`start_tls_apiserver`]
/// starts it. Without `--authorization-mode` it runs [`TESTS_AUTHORIZATION_MODE`].
pub fn config_from_flags(dir: &Path, flags: &[&str]) -> ServerConfig {
    let mut config = ServerConfig::new(dir.join("data"));
    config.write_kubeconfig = Some(dir.join("kubeconfig"));
    config.authorization =
        Authorizer::parse(TESTS_AUTHORIZATION_MODE).expect("the tests' authorization mode");
    let mut anonymous_admin = false;
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        let mut value = || *it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match *flag {
            "--feature-gates" => {
                let v = value();
                config.gates = FeatureGates::parse(v).unwrap_or_else(|e| panic!("{v}: {e}"));
            }
            "--token-auth-file" => {
                let v = value();
                config.tokens =
                    Some(Tokens::load(Path::new(v)).unwrap_or_else(|e| panic!("{v}: {e}")));
            }
            "--anonymous-admin" => anonymous_admin = true,
            "--authorization-mode" => {
                let v = value();
                config.authorization = Authorizer::parse(v).unwrap_or_else(|e| panic!("{v}: {e}"));
            }
            "--tls-san" => {
                let v = value().to_string();
                tls(&mut config).sans.push(v);
            }
            "--client-ca-file" => tls(&mut config).client_ca_file = Some(PathBuf::from(value())),
            "--tls-cert-file" => tls(&mut config).cert_file = Some(PathBuf::from(value())),
            "--tls-private-key-file" => tls(&mut config).key_file = Some(PathBuf::from(value())),
            "--retained-changes" => config.retained_changes = value().parse().expect("a count"),
            "--bookmark-interval-seconds" => {
                config.bookmark_interval =
                    Duration::from_secs(value().parse::<u64>().expect("seconds").max(1))
            }
            other => panic!("flag {other} is not supported by the in-process server"),
        }
    }
    if anonymous_admin {
        config.tokens = config.tokens.map(Tokens::with_anonymous_admin);
    }
    config
}

fn tls(config: &mut ServerConfig) -> &mut TlsConfig {
    config.tls.get_or_insert_with(TlsConfig::default)
}

/// Starts the server with the given `volhealth apiserver` flags (see [`config_from_flags`]) and
/// waits until `/readyz` answers.
pub fn start_apiserver(dir: &Path, flags: &[&str]) -> ApiServer {
    start_with_config(config_from_flags(dir, flags))
}

/// Writes the kube-apiserver token file `tokens` (its first line is the admin) to
/// `<dir>/tokens.csv` and returns its path.
pub fn write_token_file(dir: &Path, tokens: &str) -> PathBuf {
    let path = dir.join("tokens.csv");
    std::fs::write(&path, tokens).expect("writing the token file");
    path
}

/// [`start_apiserver`] with `--token-auth-file` naming the token file `tokens` (see
/// [`write_token_file`]) before the other `flags`.
pub fn start_apiserver_with_tokens(dir: &Path, tokens: &str, flags: &[&str]) -> ApiServer {
    let all = token_flags(dir, tokens, flags);
    start_apiserver(dir, &all.iter().map(String::as_str).collect::<Vec<_>>())
}

/// `--token-auth-file <dir>/tokens.csv` (written from `tokens`) followed by `flags`.
pub fn token_flags(dir: &Path, tokens: &str, flags: &[&str]) -> Vec<String> {
    let file = write_token_file(dir, tokens);
    let mut all = vec!["--token-auth-file".to_string(), file.display().to_string()];
    all.extend(flags.iter().map(|f| f.to_string()));
    all
}

/// Starts the server over TLS (certificates made in `<dir>/data/pki`, as `volhealth apiserver`
/// does without `--insecure-http`) with the given flags, and waits until it listens.
pub fn start_tls_apiserver(dir: &Path, flags: &[&str]) -> ApiServer {
    let mut config = config_from_flags(dir, flags);
    tls(&mut config);
    start_with_config(config)
}

/// Starts the server with `config` (its kubeconfig must be set) on a free loopback port and
/// waits until `/readyz` answers (over TLS: until the kubeconfig is written, once it listens).
pub fn start_with_config(config: ServerConfig) -> ApiServer {
    start_on_a_free_port(config, None)
}

/// [`start_apiserver`] with everything the server logs going to `log`.
pub fn start_apiserver_logged(dir: &Path, flags: &[&str], log: &CapturedLog) -> ApiServer {
    start_on_a_free_port(config_from_flags(dir, flags), Some(log))
}

fn start_on_a_free_port(config: ServerConfig, log: Option<&CapturedLog>) -> ApiServer {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
    ApiServer::start_on(config, listener, log)
}

impl ApiServer {
    /// Starts the server over TLS with `--authorization-mode Node,AlwaysAllow` (nodes scoped,
    /// everyone else allowed); `tokens` is the text of a kube-apiserver token file (its first
    /// line is the admin), or `None` for a server that lets every request through. Returns once
    /// a client of its kubeconfig gets an answer.
    pub async fn start(dir: &Path, tokens: Option<&str>) -> ApiServer {
        Self::start_with_modes(dir, tokens, TESTS_AUTHORIZATION_MODE).await
    }

    /// Like [`ApiServer::start`], with `--authorization-mode` set to `modes` (`Node,RBAC`).
    pub async fn start_with_modes(dir: &Path, tokens: Option<&str>, modes: &str) -> ApiServer {
        let mut config = config_from_flags(dir, &["--authorization-mode", modes]);
        // HTTPS with the CA and serving certificate made in the data dir, as
        // `volhealth apiserver` serves by default; the kubeconfig carries the CA.
        tls(&mut config);
        if let Some(text) = tokens {
            let parsed = Tokens::parse(text)
                .unwrap_or_else(|(line, why)| panic!("token file line {line}: {why}"));
            config.tokens = Some(parsed);
        }
        let server = start_with_config(config);
        server.answering().await;
        server
    }

    /// Waits until a client of the server's kubeconfig gets its version.
    async fn answering(&self) {
        let client = client_for(&self.kubeconfig).await;
        wait_for(START_TIMEOUT, "the API server to answer", || async {
            client.apiserver_version().await.ok()
        })
        .await;
    }

    fn start_on(
        config: ServerConfig,
        listener: std::net::TcpListener,
        log: Option<&CapturedLog>,
    ) -> ApiServer {
        let kubeconfig = config
            .write_kubeconfig
            .clone()
            .expect("the tests read the kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let https = config.tls.is_some();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let addr = listener.local_addr().expect("the local address");
        let url = format!("{}://{addr}", if https { "https" } else { "http" });
        let serving = config.clone();
        let service = Service::start_maybe_logged("apiserver", log, move |shutdown| async move {
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| Failure::from(format!("adopting the listener: {e}")))?;
            let (grace_tx, grace_rx) = tokio::sync::oneshot::channel::<()>();
            let shutdown = async move {
                shutdown.await;
                let _ = grace_tx.send(());
            };
            let forced = async move {
                let _ = grace_rx.await;
                tokio::time::sleep(STOP_GRACE).await;
            };
            tokio::select! {
                r = volhealth_apiserver::serve(listener, serving, shutdown) => r.map_err(Failure::from),
                _ = forced => Err(Failure::from(format!("the API server did not stop within {STOP_GRACE:?}"))),
            }
        });
        let server = ApiServer {
            kubeconfig,
            url,
            config,
            addr,
            service,
        };
        let ready = format!("{}/readyz", server.url);
        wait_for_blocking(START_TIMEOUT, "/readyz and the kubeconfig", || {
            (server.kubeconfig.exists() && (https || http_get_ok(&ready))).then_some(())
        });
        server
    }

    /// A kubeconfig for `token` (a user of the token file), written into `dir`: the server's
    /// own kubeconfig (address and CA) with that token as its user.
    pub fn token_kubeconfig(&self, dir: &Path, name: &str, token: &str) -> PathBuf {
        let path = dir.join(format!("kubeconfig-{name}"));
        let text = std::fs::read_to_string(&self.kubeconfig).expect("reading the kubeconfig");
        let mut kc: serde_json::Value = serde_saphyr::from_str(&text).expect("a kubeconfig");
        kc["users"][0]["user"] = serde_json::json!({ "token": token });
        std::fs::write(
            &path,
            serde_saphyr::to_string(&kc).expect("a kubeconfig's YAML"),
        )
        .expect("writing a kubeconfig");
        path
    }

    /// Stops the server, to be started again on the same address over the same data with
    /// [`Outage::start_again`], as after a restart of its process; clients keep their
    /// configuration.
    pub fn stop_for_outage(self) -> Outage {
        let outage = Outage {
            config: self.config.clone(),
            addr: self.addr,
        };
        self.stop().expect("the API server stops cleanly");
        outage
    }

    /// Stops the server through its shutdown future and waits until it has let go of its data
    /// directory; `Err` when it failed or had to be stopped after the grace period.
    pub fn stop(self) -> Result<(), ServiceError> {
        self.service.stop()
    }
}

/// A stopped API server, to be started again on its address over its data.
pub struct Outage {
    config: ServerConfig,
    addr: std::net::SocketAddr,
}

impl Outage {
    /// Ends the outage. The port was released moments ago; std sets SO_REUSEADDR, so binding it
    /// again succeeds while old connections linger in TIME_WAIT.
    pub async fn start_again(self) -> ApiServer {
        let server = self.start_again_blocking();
        server.answering().await;
        server
    }

    /// [`Outage::start_again`] for a test without a runtime: returns once `/readyz` answers
    /// (over TLS: once the kubeconfig is written).
    pub fn start_again_blocking(self) -> ApiServer {
        let listener =
            std::net::TcpListener::bind(self.addr).expect("binding the same address again");
        ApiServer::start_on(self.config, listener, None)
    }
}
