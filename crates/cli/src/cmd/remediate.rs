//! `volhealth remediate`: act on health conditions as a policy file says (dry-run by default).

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_daemon::{duration, http_endpoint, shutdown_signal};
use volhealth_remediate::Policy;
use volhealth_remediate::controller::{ControllerConfig, LeaderElection, serve};

/// Flags of `volhealth remediate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kubeconfig file (default: KUBECONFIG, else in-cluster, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The policy file (YAML), validated before anything runs.
    #[arg(long)]
    pub policy: PathBuf,
    /// Only say what would be done (log and Event); --dry-run=false acts.
    #[arg(long, default_value = "true", action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true",
          value_parser = crate::cmd::go_flags::parse_bool)]
    pub dry_run: bool,
    /// How often the rules are evaluated.
    #[arg(long, default_value = "5s")]
    pub interval: String,
    /// Where to serve /metrics, /healthz and /readyz: :PORT or HOST:PORT ("" = not served).
    #[arg(long, default_value = ":8082")]
    pub http_endpoint: String,
    /// --leader-election (on the Lease `volhealth-remediate`) and its timings.
    #[command(flatten)]
    pub leader: volhealth_sidecar_cli::leader_flags::LeaderFlags,
    /// Namespace of the leader Lease.
    #[arg(long, default_value = "kube-system")]
    pub leader_election_namespace: String,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::cmd::logging::LogArgs,
}

/// Runs the controller until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.policy)
        .with_context(|| format!("reading {}", args.policy.display()))?;
    let policy =
        Policy::parse(&text).map_err(|e| anyhow::anyhow!("{}:\n{e}", args.policy.display()))?;
    let config = ControllerConfig {
        policy,
        dry_run: args.dry_run,
        tick: duration::parse(&args.interval).context("--interval")?,
    };
    let http = http_endpoint::parse_optional(&args.http_endpoint).context("--http-endpoint")?;
    let leader = args
        .leader
        .election(Some(args.leader_election_namespace.clone()))?
        .map(|le| LeaderElection {
            identity: Some(volhealth_remediate::leader::default_identity()),
            ..le
        });
    volhealth_daemon::in_progress::name_run_loop("the remediation controller");
    serve(
        args.kubeconfig.as_deref(),
        config,
        http,
        leader,
        shutdown_signal::sigint_or_sigterm(),
    )
    .await
    .context("volhealth remediate")?;
    Ok(ExitCode::SUCCESS)
}
