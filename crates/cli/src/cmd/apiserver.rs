//! `volhealth apiserver`: the embedded Kubernetes API server (v1.37 subset, SQLite-backed).

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_apiserver::authz::{Authorizer, Tokens};
use volhealth_apiserver::{FeatureGates, ServerConfig};

/// Flags of `volhealth apiserver`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (plain HTTP); port 0 picks a free port.
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
    /// With --token-auth-file: requests without credentials act as an administrator (kubectl
    /// sends no token over plain HTTP); tokens still identify and scope nodes.
    #[arg(long, requires = "token_auth_file")]
    pub anonymous_admin: bool,
    /// Authorizers to ask in order, as kube-apiserver names them: a comma list of Node, RBAC,
    /// AlwaysAllow and AlwaysDeny. The first to allow or deny decides; a request none allows is
    /// forbidden. With RBAC the bootstrap roles and bindings are created when missing.
    #[arg(long, default_value = "Node,AlwaysAllow")]
    pub authorization_mode: String,
    /// Write a kubeconfig for this server (with the token file's first token) once listening.
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
    config.bookmark_interval =
        std::time::Duration::from_secs(args.bookmark_interval_seconds.max(1));
    config.retained_changes = args.retained_changes;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding --listen {}", args.listen))?;
    volhealth_apiserver::serve(
        listener,
        config,
        volhealth_daemon::shutdown_signal::sigint_or_sigterm(),
    )
    .await
    .context("running the API server")?;
    Ok(ExitCode::SUCCESS)
}
