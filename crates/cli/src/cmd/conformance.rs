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
    /// Deadline of each RPC (e.g. 10s, 500ms; a plain number is seconds).
    #[arg(long, default_value = "10s", value_parser = seconds_or_duration)]
    rpc_timeout: Duration,
    /// How long an injected condition may take to appear or clear (e.g. 30s, 1m; a plain
    /// number is seconds).
    #[arg(long, default_value = "30s", value_parser = seconds_or_duration)]
    inject_timeout: Duration,
    /// Directory for the temporary staging and target paths (must be visible to the node plugin).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

/// The shortest deadline either timeout flag gives.
const MIN_TIMEOUT: Duration = Duration::from_millis(100);

/// A duration as every other volhealth flag takes it (`10s`, `500ms`), or a plain number of
/// seconds as these two flags took before.
fn seconds_or_duration(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<u64>() {
        Ok(seconds) => Ok(Duration::from_secs(seconds)),
        Err(_) => volhealth_daemon::duration::parse(s).map_err(|e| e.to_string()),
    }
}

/// Runs the suite; exit code 0 only when nothing failed.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut options = volhealth_conformance::Options::new(args.csi_address);
    options.node_csi_address = args.node_csi_address;
    options.inject_cmd = args.inject_cmd;
    options.rpc_timeout = args.rpc_timeout.max(MIN_TIMEOUT);
    options.inject_timeout = args.inject_timeout.max(MIN_TIMEOUT);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_take_durations_and_plain_seconds() {
        assert_eq!(seconds_or_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(seconds_or_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(seconds_or_duration("10"), Ok(Duration::from_secs(10)));
        assert!(seconds_or_duration("ten").is_err());
    }
}
