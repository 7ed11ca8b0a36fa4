//! `volhealth conformance`: the health-RPC conformance suite against any CSI driver.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

/// Flags of `volhealth conformance`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The driver's CSI socket (its controller plugin), e.g. unix:///run/csi/csi.sock.
    #[arg(long)]
    csi_address: String,
    /// The node plugin's socket, when it is not --csi-address.
    #[arg(long)]
    node_csi_address: Option<String>,
    /// Shell command that injects conditions: run as `CMD set SCOPE TARGET STATUS REASON` and
    /// `CMD clear SCOPE TARGET` (SCOPE: controller, node or storage). For volhealth's driver:
    /// "volhealth inject --state-dir DIR conformance".
    #[arg(long, value_name = "CMD")]
    inject_cmd: Option<String>,
    /// Also write the results as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// KEY=VALUE lines sent as secrets wherever CSI carries them.
    #[arg(long, value_name = "FILE")]
    secrets_file: Option<PathBuf>,
    /// Deadline of each RPC, in seconds.
    #[arg(long, default_value_t = 10)]
    rpc_timeout: u64,
    /// How long an injected condition may take to appear or clear, in seconds.
    #[arg(long, default_value_t = 30)]
    inject_timeout: u64,
    /// Directory for the temporary staging and target paths (must be visible to the node plugin).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

/// Runs the suite; exit code 0 only when nothing failed.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut options = volhealth_conformance::Options::new(args.csi_address);
    options.node_csi_address = args.node_csi_address;
    options.inject_cmd = args.inject_cmd;
    options.rpc_timeout = Duration::from_secs(args.rpc_timeout.max(1));
    options.inject_timeout = Duration::from_secs(args.inject_timeout.max(1));
    options.work_dir = args.work_dir;
    if let Some(f) = &args.secrets_file {
        options.secrets = volhealth_conformance::secrets::load(f)?;
    }
    let mut progress = std::io::stdout();
    let interrupt = volhealth_daemon::shutdown_signal::sigint_or_sigterm();
    let report = volhealth_conformance::run(options, &mut progress, interrupt).await?;
    print!("{}", report.summary());
    if let Some(path) = &args.junit {
        std::fs::write(path, volhealth_conformance::junit::render(&report))
            .with_context(|| format!("writing JUnit XML to {}", path.display()))?;
    }
    Ok(if report.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
