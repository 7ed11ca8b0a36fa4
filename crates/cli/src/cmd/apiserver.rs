//! `volhealth apiserver`: the embedded Kubernetes API server (v1.37 subset, SQLite-backed).

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_apiserver::authz::{Authorizer, Tokens};
use volhealth_apiserver::{FeatureGates, ServerConfig, TlsConfig};

/// Flags of `volhealth apiserver`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (HTTPS unless --insecure-http); port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: String,
    /// Directory for the SQLite database.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Feature gates, e.g. `CSIVolumeHealth=false` (CSIVolumeHealth defaults to true).
    #[arg(long, default_value = "")]
    pub feature_gates: String,
    /// Static token file in kube-apiserver format: `token,user,uid,"group1,group2"`.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// With --token-auth-file and --insecure-http: requests without credentials act as an
    /// administrator (kubectl sends no token over plain HTTP); tokens still identify and scope
    /// nodes.
    #[arg(long, requires_all = ["token_auth_file", "insecure_http"])]
    pub anonymous_admin: bool,
    /// Authorizers to ask in order, as kube-apiserver names them: a comma list of Node, RBAC,
    /// AlwaysAllow and AlwaysDeny. The first to allow or deny decides; a request none allows is
    /// forbidden. With RBAC the bootstrap roles and bindings are created when missing.
    /// Whatever the modes, node identities may not impersonate.
    #[arg(long, default_value = "Node,RBAC")]
    pub authorization_mode: String,
    /// The serving certificate (PEM, with its chain); without it one is made in
    /// <data-dir>/pki, signed by a CA made there.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA certificates (PEM) that sign client certificates; a verified client certificate
    /// authenticates as CN = user, O = groups (default: the CA in <data-dir>/pki).
    #[arg(long, value_name = "FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// A name (IP address or DNS name) the made serving certificate covers besides 127.0.0.1,
    /// ::1 and localhost; repeatable.
    #[arg(long = "tls-san", value_name = "NAME")]
    pub tls_sans: Vec<String>,
    /// Serve plain HTTP instead of HTTPS (no TLS, no client certificates).
    #[arg(long, conflicts_with_all = ["tls_cert_file", "tls_private_key_file", "client_ca_file", "tls_sans"])]
    pub insecure_http: bool,
    /// Write a kubeconfig for this server (its CA, and the token file's first token) once
    /// listening.
    #[arg(long)]
    pub write_kubeconfig: Option<PathBuf>,
    /// Interval between watch bookmarks, in seconds.
    #[arg(long, default_value_t = 10, hide = true)]
    pub bookmark_interval_seconds: u64,
    /// How many changes the watch history keeps at least.
    #[arg(long, default_value_t = 50_000, hide = true)]
    pub retained_changes: u64,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::cmd::logging::LogArgs,
}

/// Runs `volhealth apiserver` until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let gates = FeatureGates::parse(&args.feature_gates)
        .map_err(|e| anyhow::anyhow!("invalid --feature-gates {:?}: {e}", args.feature_gates))?;
    let tokens = match &args.token_auth_file {
        Some(p) => Some(
            Tokens::load(p)
                .with_context(|| format!("loading --token-auth-file {}", p.display()))?,
        ),
        None => None,
    };
    let tokens = if args.anonymous_admin {
        tokens.map(Tokens::with_anonymous_admin)
    } else {
        tokens
    };
    let authorization = Authorizer::parse(&args.authorization_mode).map_err(|e| {
        anyhow::anyhow!(
            "invalid --authorization-mode {:?}: {e}",
            args.authorization_mode
        )
    })?;
    let mut config = ServerConfig::new(&args.data_dir);
    config.gates = gates;
    config.authorization = authorization;
    config.tokens = tokens;
    config.write_kubeconfig = args.write_kubeconfig.clone();
    config.tls = (!args.insecure_http).then(|| TlsConfig {
        cert_file: args.tls_cert_file.clone(),
        key_file: args.tls_private_key_file.clone(),
        client_ca_file: args.client_ca_file.clone(),
        sans: args.tls_sans.clone(),
    });
    config.bookmark_interval =
        std::time::Duration::from_secs(args.bookmark_interval_seconds.max(1));
    config.retained_changes = args.retained_changes;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding --listen {}", args.listen))?;
    volhealth_daemon::in_progress::name_run_loop(format!("the API server on {}", args.listen));
    volhealth_apiserver::serve(
        listener,
        config,
        volhealth_daemon::shutdown_signal::sigint_or_sigterm(),
    )
    .await
    .context("running the API server")?;
    Ok(ExitCode::SUCCESS)
}
