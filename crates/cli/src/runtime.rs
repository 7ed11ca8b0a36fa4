//! What every command's `main` shares: the async runtime, sized for the job, and the process-wide
//! metrics path. Kept apart from `cmd` so that the single-component binaries can include it.

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
    /// driver) never needs more, and each extra worker would bring its own allocator arena.
    One,
    /// A multi-threaded runtime with at most this many workers (fewer on a smaller machine).
    AtMost(usize),
    /// One worker per CPU (tokio's default), for the API server, the driver and the tools.
    PerCpu,
}

/// The monitor's workers: its work is one probe loop, one write loop and a few watches, which two
/// workers keep up with at 5,000 PVCs; more would only add threads and allocator arenas.
pub const MONITOR_THREADS: Threads = Threads::AtMost(2);

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
        Threads::AtMost(_) | Threads::PerCpu => tokio::runtime::Builder::new_multi_thread(),
    };
    if let Threads::AtMost(n) = threads {
        builder.worker_threads(worker_count(n));
    }
    let rt = builder
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("starting the async runtime: {e}"))?;
    rt.block_on(fut)
}

/// At most `limit` workers, and no more than the CPUs this process may use (at least one).
fn worker_count(limit: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    limit.min(cpus).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_count_is_bounded_by_the_limit_and_the_cpus() {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(worker_count(1), 1);
        assert_eq!(worker_count(0), 1);
        assert_eq!(worker_count(usize::MAX), cpus);
        assert_eq!(worker_count(2), 2.min(cpus));
    }

    #[test]
    fn each_runtime_size_runs_its_future() {
        for threads in [Threads::One, Threads::AtMost(2), Threads::PerCpu] {
            let code = block_on_with(threads, async { Ok(ExitCode::SUCCESS) }).unwrap();
            assert_eq!(code, ExitCode::SUCCESS, "{threads:?}");
        }
    }
}
