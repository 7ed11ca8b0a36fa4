//! `volhealth inject`: add or clear injected health conditions, RPC faults and list chaos in a
//! driver's state dir (see `volhealth_local_cluster::inject`); here only its flags.

use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_driver::injection::Side;
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
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Add a volume health condition (a different status or reason adds another entry).
    Volume {
        /// The volume id.
        volume_id: String,
        /// Which side reports it.
        #[arg(long, value_enum)]
        side: Side,
        /// Inaccessible, DataLoss, Degraded, or a raw number sent as it is.
        #[arg(long)]
        status: String,
        /// CamelCase reason.
        #[arg(long)]
        reason: String,
        /// Human-readable message.
        #[arg(long, default_value = "")]
        message: String,
    },
    /// Add a volume health condition to the volume behind a PVC (needs --dir).
    Pvc {
        /// The claim as NAMESPACE/NAME.
        claim: String,
        /// Which side reports it.
        #[arg(long, value_enum)]
        side: Side,
        /// Inaccessible, DataLoss, Degraded, or a raw number sent as it is.
        #[arg(long)]
        status: String,
        /// CamelCase reason.
        #[arg(long)]
        reason: String,
        /// Human-readable message.
        #[arg(long, default_value = "")]
        message: String,
    },
    /// Add a storage backend condition reported by NodeGetStorageHealth.
    Storage {
        /// Only the node plugin of this node reports it (default: every node plugin).
        #[arg(long)]
        node: Option<String>,
        /// StorageUnreachable, StorageDegraded, or a raw number sent as it is.
        #[arg(long)]
        status: String,
        /// CamelCase reason.
        #[arg(long)]
        reason: String,
        /// Human-readable message.
        #[arg(long, default_value = "")]
        message: String,
        /// Access mode it applies to (ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod, or a CSI name).
        #[arg(long)]
        access_mode: Option<String>,
        /// Volume mode it applies to: Filesystem or Block.
        #[arg(long)]
        volume_mode: Option<String>,
    },
    /// The `volhealth conformance --inject-cmd` contract: `set SCOPE TARGET STATUS REASON` or
    /// `clear SCOPE TARGET`, SCOPE being controller, node or storage (TARGET: volume id or node id).
    Conformance {
        #[command(subcommand)]
        action: ConformanceAction,
    },
    /// Remove injected conditions or faults.
    Clear {
        #[command(subcommand)]
        what: ClearWhat,
    },
    /// Make an RPC fail with a gRPC code at a rate, and/or answer after a delay.
    Rpc {
        /// gRPC method, e.g. ControllerListVolumeHealth, NodeGetVolumeHealth, Probe.
        method: String,
        /// gRPC code name (UNAVAILABLE) or number; OK only delays, OK without delay removes the fault.
        #[arg(long)]
        code: String,
        /// Probability in [0, 1] that a call fails.
        #[arg(long, default_value_t = 1.0)]
        rate: f64,
        /// Delay before answering, e.g. 500ms, 2s, 1m.
        #[arg(long)]
        delay: Option<String>,
        /// The failure's message (default: `injected fault for METHOD`).
        #[arg(long)]
        message: Option<String>,
    },
    /// Turn on paging inconsistencies of ControllerListVolumeHealth, or off with --off.
    ListChaos {
        /// Repeat an entry of the previous page at the start of the next.
        #[arg(long)]
        duplicates: bool,
        /// Leave a rotating fifth of the volumes out of each listing cycle.
        #[arg(long)]
        omissions: bool,
        /// Turn both off.
        #[arg(long, conflicts_with_all = ["duplicates", "omissions"])]
        off: bool,
    },
}

#[derive(Debug, clap::Subcommand)]
enum ConformanceAction {
    /// Report STATUS with REASON on TARGET from now on.
    Set {
        /// controller, node or storage.
        scope: Scope,
        /// Volume id, or the node id for storage.
        target: String,
        /// Inaccessible, DataLoss, Degraded, StorageUnreachable or StorageDegraded.
        status: String,
        /// CamelCase reason.
        reason: String,
    },
    /// Stop reporting what `set` asked for on TARGET in SCOPE.
    Clear {
        /// controller, node or storage.
        scope: Scope,
        /// Volume id, or the node id for storage.
        target: String,
    },
}

/// Where a conformance injection is reported.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Scope {
    /// ControllerGetVolumeHealth and ControllerListVolumeHealth.
    Controller,
    /// NodeGetVolumeHealth.
    Node,
    /// NodeGetStorageHealth.
    Storage,
}

#[derive(Debug, clap::Subcommand)]
enum ClearWhat {
    /// One volume's conditions (one side, or both).
    Volume {
        /// The volume id.
        volume_id: String,
        /// Only this side.
        #[arg(long, value_enum)]
        side: Option<Side>,
    },
    /// The conditions of the volume behind a PVC (needs --dir).
    Pvc {
        /// The claim as NAMESPACE/NAME.
        claim: String,
        /// Only this side.
        #[arg(long, value_enum)]
        side: Option<Side>,
    },
    /// All storage conditions (with --node: only that node's own).
    Storage {
        /// Only the conditions injected for this node.
        #[arg(long)]
        node: Option<String>,
    },
    /// The fault of one method, or all faults.
    Rpc {
        /// The method (all faults when left out).
        method: Option<String>,
    },
    /// Everything: conditions, faults and list chaos.
    All,
}

impl From<Args> for InjectRequest {
    fn from(a: Args) -> Self {
        InjectRequest {
            dir: a.dir,
            state_dir: a.state_dir,
            what: a.what.into(),
        }
    }
}

impl From<What> for Injection {
    fn from(w: What) -> Self {
        match w {
            What::Volume {
                volume_id,
                side,
                status,
                reason,
                message,
            } => Injection::Volume {
                volume_id,
                side,
                status,
                reason,
                message,
            },
            What::Pvc {
                claim,
                side,
                status,
                reason,
                message,
            } => Injection::Pvc {
                claim,
                side,
                status,
                reason,
                message,
            },
            What::Storage {
                node,
                status,
                reason,
                message,
                access_mode,
                volume_mode,
            } => Injection::Storage {
                node,
                status,
                reason,
                message,
                access_mode,
                volume_mode,
            },
            What::Conformance { action } => Injection::Conformance {
                action: action.into(),
            },
            What::Clear { what } => Injection::Clear { what: what.into() },
            What::Rpc {
                method,
                code,
                rate,
                delay,
                message,
            } => Injection::Rpc {
                method,
                code,
                rate,
                delay,
                message,
            },
            What::ListChaos {
                duplicates,
                omissions,
                off,
            } => Injection::ListChaos {
                duplicates,
                omissions,
                off,
            },
        }
    }
}

impl From<ConformanceAction> for inject::ConformanceAction {
    fn from(a: ConformanceAction) -> Self {
        match a {
            ConformanceAction::Set {
                scope,
                target,
                status,
                reason,
            } => inject::ConformanceAction::Set {
                scope: scope.into(),
                target,
                status,
                reason,
            },
            ConformanceAction::Clear { scope, target } => inject::ConformanceAction::Clear {
                scope: scope.into(),
                target,
            },
        }
    }
}

impl From<Scope> for inject::Scope {
    fn from(s: Scope) -> Self {
        match s {
            Scope::Controller => inject::Scope::Controller,
            Scope::Node => inject::Scope::Node,
            Scope::Storage => inject::Scope::Storage,
        }
    }
}

impl From<ClearWhat> for inject::Clear {
    fn from(c: ClearWhat) -> Self {
        match c {
            ClearWhat::Volume { volume_id, side } => inject::Clear::Volume { volume_id, side },
            ClearWhat::Pvc { claim, side } => inject::Clear::Pvc { claim, side },
            ClearWhat::Storage { node } => inject::Clear::Storage { node },
            ClearWhat::Rpc { method } => inject::Clear::Rpc { method },
            ClearWhat::All => inject::Clear::All,
        }
    }
}

/// Runs `volhealth inject` and says what it did.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    println!("{}", inject::run(args.into()).await?);
    Ok(ExitCode::SUCCESS)
}
