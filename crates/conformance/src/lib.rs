//! A conformance suite for the CSI v1.13.0 health RPCs (KEP-1432) of any CSI driver.
//!
//! [`run`] connects to a driver's unix socket(s), discovers its capabilities, creates its own
//! test volumes when the driver can, runs every check of [`all_cases`] (each a named case with a
//! spec reference, skipped with a reason when a capability is absent), cleans up what it created
//! (also when interrupted) and returns a [`Report`]: the human summary ([`Report::summary`]) and
//! JUnit XML ([`junit::render`]) are made from it.
//!
//! # Layout
//! - [`rules`]: the entry rules as pure functions.
//! - [`inject`]: the `--inject-cmd` contract.
//! - [`secrets`]: the `--secrets-file` format.
//! - [`report`] / [`junit`]: results and their renderings.
//! - `session`, `fixture`, `checks`: the connection, what the run created, the checks.

mod checks;
mod fixture;
pub mod inject;
pub mod junit;
pub mod report;
pub mod rules;
pub mod secrets;
mod session;
mod volumes;

use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use checks::all_cases;
pub use report::{Case, CaseResult, Outcome, Report};

/// What to test and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The driver's (controller) socket, `unix:///path`.
    pub csi_address: String,
    /// The node plugin's socket, when it is not `csi_address`.
    pub node_csi_address: Option<String>,
    /// The `--inject-cmd` shell command (see [`inject`]).
    pub inject_cmd: Option<String>,
    /// Secrets sent wherever CSI carries them.
    pub secrets: HashMap<String, String>,
    /// Deadline of each RPC.
    pub rpc_timeout: Duration,
    /// How long to wait for a socket to accept connections.
    pub connect_timeout: Duration,
    /// How long an injected condition may take to appear, and to disappear after clear.
    pub inject_timeout: Duration,
    /// Where the temporary staging and target paths go (the system temp dir when `None`).
    pub work_dir: Option<PathBuf>,
}

impl Options {
    /// Options with the defaults for everything but the address.
    pub fn new(csi_address: impl Into<String>) -> Options {
        Options {
            csi_address: csi_address.into(),
            node_csi_address: None,
            inject_cmd: None,
            secrets: HashMap::new(),
            rpc_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(30),
            inject_timeout: Duration::from_secs(30),
            work_dir: None,
        }
    }
}

/// Why a run could not start. Once the checks run, problems are case results instead.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket did not answer.
    #[error("connecting to the driver: {0}")]
    Connect(#[from] volhealth_csi::Error),
    /// GetPluginInfo or a capability RPC failed.
    #[error("discovering the driver's capabilities: {rpc_error}")]
    Discover {
        /// The gRPC error, code and message.
        rpc_error: String,
    },
    /// The temporary directory could not be made.
    #[error("creating the temporary directory for staging and target paths: {0}")]
    WorkDir(std::io::Error),
}

/// Runs the suite against the driver, writing progress lines to `progress`. When `interrupt`
/// resolves, the remaining cases are dropped, cleanup runs, and the report says so.
pub async fn run(
    options: Options,
    progress: &mut (dyn Write + Send),
    interrupt: impl Future<Output = ()>,
) -> Result<Report, Error> {
    let started = Instant::now();
    let controller =
        volhealth_csi::client::connect(&options.csi_address, options.connect_timeout).await?;
    let node = match &options.node_csi_address {
        Some(a) => volhealth_csi::client::connect(a, options.connect_timeout).await?,
        None => controller.clone(),
    };
    let fixture = fixture::Fixture::new(options.work_dir.as_deref()).map_err(Error::WorkDir)?;
    let mut session = session::Session::new(session::SessionParts {
        controller,
        node,
        timeout: options.rpc_timeout,
        secrets: options.secrets,
        fixture,
        inject_timeout: options.inject_timeout,
    });
    let info = session.discover().await.map_err(|e| Error::Discover {
        rpc_error: format!("{:?}: {}", e.code(), e.message()),
    })?;
    let driver = format!("{} {}", info.name, info.vendor_version);
    let c = &session.caps;
    let _ = writeln!(
        progress,
        "volhealth conformance: driver {driver}; controller LIST_VOLUME_HEALTH={} GET_VOLUME_HEALTH={} CREATE_DELETE_VOLUME={}; node GET_VOLUME_HEALTH={} GET_STORAGE_HEALTH={} STAGE_UNSTAGE_VOLUME={}",
        c.list, c.get, c.create_delete, c.node_volume, c.node_storage, c.stage_unstage
    );
    let injector = options
        .inject_cmd
        .as_ref()
        .map(|cmd| inject::Injector::new(cmd.clone(), Duration::from_secs(60)));
    let results = Mutex::new(Vec::new());
    let interrupted = {
        let mut runner = checks::Runner {
            s: &session,
            injector: injector.as_ref(),
            progress: &mut *progress,
            results: &results,
            total: all_cases().len(),
        };
        tokio::pin!(interrupt);
        tokio::select! {
            () = checks::run_all(&mut runner) => false,
            () = &mut interrupt => true,
        }
    };
    if interrupted {
        let _ = writeln!(progress, "interrupted: cleaning up what this run created…");
    }
    let cleanup_problems = volumes::cleanup(&session, injector.as_ref()).await;
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(Report {
        driver,
        results,
        latency: report::latencies(&session.samples()),
        interrupted,
        cleanup_problems,
        duration: started.elapsed(),
    })
}

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
