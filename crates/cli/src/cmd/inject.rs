//! `volhealth inject`: add or clear injected health conditions, RPC faults and list chaos in a
//! driver's state dir (see `volhealth_local_cluster::inject`, whose request types are the
//! subcommands); here only the flags that say where.

use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_local_cluster::inject::{self, InjectRequest, Injection};

/// Flags of `volhealth inject`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The --dir of a running `volhealth up` [default: .volhealth, as `up`'s].
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
    /// The state dir of a `volhealth driver` you started yourself (in place of --dir); `pvc`
    /// needs --dir.
    #[arg(long, global = true, conflicts_with = "dir")]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    what: Injection,
}

impl From<Args> for InjectRequest {
    fn from(a: Args) -> Self {
        InjectRequest {
            dir: a.dir,
            state_dir: a.state_dir,
            what: a.what,
        }
    }
}

/// Runs `volhealth inject` and says what it did.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    println!("{}", inject::run(args.into()).await?);
    Ok(ExitCode::SUCCESS)
}
