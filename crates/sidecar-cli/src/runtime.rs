//! What every command's `main` shares: the async runtime, sized for the job, and the process-wide
//! metrics path.

use std::future::Future;
use std::process::ExitCode;

/// `--metrics-path`: where the HTTP endpoint serves the metrics page, for the whole process.
pub fn set_metrics_path(path: &str) -> anyhow::Result<()> {
    volhealth_daemon::endpoint_server::set_metrics_path(path)
        .map_err(|reason| anyhow::anyhow!("invalid --metrics-path {path:?}: {reason}"))
}

/// How many threads a subcommand's async runtime gets: sized for the job, not for the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// Everything on the calling thread. The agent's work (a few dozen pods, one socket per
    /// driver) and the monitor's never need more, and each extra worker would bring its own
    /// allocator arena.
    One,
    /// One worker per CPU (tokio's default), for the API server, the driver and the tools.
    PerCpu,
}

/// The monitor's runtime: its work is one probe loop, one write loop and two watches, all
/// waiting on the network, which one thread keeps up with at 5,000 PVCs (a cycle's work is a few
/// milliseconds per 1,000 volumes). Each further worker would bring an allocator arena of its
/// own, and with it its own copy of every cycle's short-lived peak.
pub const MONITOR_THREADS: Threads = Threads::One;

/// Runs a subcommand on a multi-threaded tokio runtime with one worker per CPU.
pub fn block_on<F>(fut: F) -> anyhow::Result<ExitCode>
where
    F: Future<Output = anyhow::Result<ExitCode>>,
{
    block_on_with(Threads::PerCpu, fut)
}

/// Runs a subcommand on a tokio runtime of `threads`.
pub fn block_on_with<F>(threads: Threads, fut: F) -> anyhow::Result<ExitCode>
where
    F: Future<Output = anyhow::Result<ExitCode>>,
{
    let mut builder = match threads {
        Threads::One => tokio::runtime::Builder::new_current_thread(),
        Threads::PerCpu => tokio::runtime::Builder::new_multi_thread(),
    };
    let rt = builder
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("starting the async runtime: {e}"))?;
    rt.block_on(fut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runtime_size_runs_its_future() {
        for threads in [Threads::One, Threads::PerCpu] {
            let code = block_on_with(threads, async { Ok(ExitCode::SUCCESS) }).unwrap();
            assert_eq!(code, ExitCode::SUCCESS, "{threads:?}");
        }
    }
}
