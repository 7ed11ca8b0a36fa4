//! `volhealth inject`: add or clear injected health conditions, RPC faults and list chaos in a
//! driver's state dir. A running driver picks changes up on its next RPC.

use crate::failure::Context as _;
use crate::failure::{Result, bail, ensure};
use std::path::PathBuf;
use volhealth_driver::condition::{Condition, StorageCondition};
use volhealth_driver::injection::{
    self, ListChaos, NodeStorageInjection, RpcFault, Side, VolumeInjection,
};
use volhealth_driver::state::StateDir;
use volhealth_model::{StorageStatus, VolumeStatus};

use crate::up::DEFAULT_DIR;

/// One `volhealth inject`: where the driver's state is, and what to inject or clear.
#[derive(Debug, Clone)]
pub struct InjectRequest {
    /// The directory of a running `volhealth up` (default: [`DEFAULT_DIR`], unless
    /// `state_dir` is given).
    pub dir: Option<PathBuf>,
    /// The state dir of a `volhealth driver` started by hand (in place of `dir`); a claim
    /// needs `dir`.
    pub state_dir: Option<PathBuf>,
    /// What to inject or clear.
    pub what: Injection,
}

/// What to inject or clear; also `volhealth inject`'s subcommands.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Subcommand))]
pub enum Injection {
    /// Add a volume health condition (a different status or reason adds another entry).
    Volume {
        /// The volume id.
        volume_id: String,
        /// The condition.
        #[cfg_attr(feature = "clap", command(flatten))]
        condition: VolumeCondition,
    },
    /// Add a volume health condition to the volume behind a PVC (needs --dir).
    Pvc {
        /// The claim as NAMESPACE/NAME.
        claim: String,
        /// The condition.
        #[cfg_attr(feature = "clap", command(flatten))]
        condition: VolumeCondition,
    },
    /// Add a storage backend condition reported by NodeGetStorageHealth.
    Storage {
        /// Only the node plugin of this node reports it (default: every node plugin).
        #[cfg_attr(feature = "clap", arg(long))]
        node: Option<String>,
        /// StorageUnreachable, StorageDegraded, or a raw number sent as it is.
        #[cfg_attr(feature = "clap", arg(long))]
        status: String,
        /// CamelCase reason.
        #[cfg_attr(feature = "clap", arg(long))]
        reason: String,
        /// Human-readable message.
        #[cfg_attr(feature = "clap", arg(long, default_value = ""))]
        message: String,
        /// Access mode it applies to (ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod, or a CSI name).
        #[cfg_attr(feature = "clap", arg(long))]
        access_mode: Option<String>,
        /// Volume mode it applies to: Filesystem or Block.
        #[cfg_attr(feature = "clap", arg(long))]
        volume_mode: Option<String>,
    },
    /// The `volhealth conformance --inject-cmd` contract: `set SCOPE TARGET STATUS REASON` or
    /// `clear SCOPE TARGET`, SCOPE being controller, node or storage (TARGET: volume id or node id).
    Conformance {
        /// Set or clear.
        #[cfg_attr(feature = "clap", command(subcommand))]
        action: ConformanceAction,
    },
    /// Remove injected conditions or faults.
    Clear {
        /// What to remove.
        #[cfg_attr(feature = "clap", command(subcommand))]
        what: Clear,
    },
    /// Make an RPC fail with a gRPC code at a rate, and/or answer after a delay.
    Rpc {
        /// gRPC method, e.g. ControllerListVolumeHealth, NodeGetVolumeHealth, Probe.
        method: String,
        /// gRPC code name (UNAVAILABLE) or number; OK only delays, OK without delay removes the fault.
        #[cfg_attr(feature = "clap", arg(long))]
        code: String,
        /// Probability in [0, 1] that a call fails.
        #[cfg_attr(feature = "clap", arg(long, default_value_t = 1.0))]
        rate: f64,
        /// Delay before answering, e.g. 500ms, 2s, 1m.
        #[cfg_attr(feature = "clap", arg(long))]
        delay: Option<String>,
        /// The failure's message (default: `injected fault for METHOD`).
        #[cfg_attr(feature = "clap", arg(long))]
        message: Option<String>,
    },
    /// Turn on paging inconsistencies of ControllerListVolumeHealth, or off with --off.
    ListChaos {
        /// Repeat an entry of the previous page at the start of the next.
        #[cfg_attr(feature = "clap", arg(long))]
        duplicates: bool,
        /// Leave a rotating fifth of the volumes out of each listing cycle.
        #[cfg_attr(feature = "clap", arg(long))]
        omissions: bool,
        /// Turn both off.
        #[cfg_attr(feature = "clap", arg(long, conflicts_with_all = ["duplicates", "omissions"]))]
        off: bool,
    },
}

/// A volume health condition to add, as `inject volume` and `inject pvc` take it.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct VolumeCondition {
    /// Which side reports it.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub side: Side,
    /// Inaccessible, DataLoss, Degraded, or a raw number sent as it is.
    #[cfg_attr(feature = "clap", arg(long))]
    pub status: String,
    /// CamelCase reason.
    #[cfg_attr(feature = "clap", arg(long))]
    pub reason: String,
    /// Human-readable message.
    #[cfg_attr(feature = "clap", arg(long, default_value = ""))]
    pub message: String,
}

/// One call of the `volhealth conformance --inject-cmd` contract.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Subcommand))]
pub enum ConformanceAction {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Scope {
    /// ControllerGetVolumeHealth and ControllerListVolumeHealth.
    Controller,
    /// NodeGetVolumeHealth.
    Node,
    /// NodeGetStorageHealth.
    Storage,
}

/// What to remove.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Subcommand))]
pub enum Clear {
    /// One volume's conditions (one side, or both).
    Volume {
        /// The volume id.
        volume_id: String,
        /// Only this side.
        #[cfg_attr(feature = "clap", arg(long, value_enum))]
        side: Option<Side>,
    },
    /// The conditions of the volume behind a PVC (needs --dir).
    Pvc {
        /// The claim as NAMESPACE/NAME.
        claim: String,
        /// Only this side.
        #[cfg_attr(feature = "clap", arg(long, value_enum))]
        side: Option<Side>,
    },
    /// All storage conditions (with --node: only that node's own).
    Storage {
        /// Only the conditions injected for this node.
        #[cfg_attr(feature = "clap", arg(long))]
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

/// Parses `500ms`, `2s`, `1.5s`, `1m` or a plain number of milliseconds.
fn parse_delay_ms(s: &str) -> Result<u64> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60_000.0)
    } else {
        (s, 1.0)
    };
    let value: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("delay {s:?}: expected e.g. 500ms, 2s or 1m"))?;
    ensure!(
        value >= 0.0 && value.is_finite(),
        "delay {s:?} must not be negative"
    );
    Ok((value * scale).round() as u64)
}

/// Carries out one `volhealth conformance --inject-cmd` call.
fn conformance(state: &StateDir, action: ConformanceAction) -> Result<String> {
    let side = |scope: Scope| match scope {
        Scope::Controller => Side::Controller,
        _ => Side::Node,
    };
    Ok(match action {
        ConformanceAction::Set {
            scope: Scope::Storage,
            target,
            status,
            reason,
        } => {
            let message = "injected by volhealth conformance".to_string();
            let condition = storage_condition(&status, &reason, message, None, None)?;
            add_node_storage_condition(state, &target, condition)?;
            format!("injected storage condition {status}/{reason} on node {target}")
        }
        ConformanceAction::Set {
            scope,
            target,
            status,
            reason,
        } => {
            ensure!(!target.is_empty(), "a volume id is required");
            let number = injection::parse_volume_status(&status)?;
            let message = "injected by volhealth conformance".to_string();
            add_volume_condition(state, &target, side(scope), number, &reason, message)?;
            format!("injected {scope:?} condition {status}/{reason} on volume {target}")
        }
        ConformanceAction::Clear {
            scope: Scope::Storage,
            target,
        } => {
            injection::update(state, |i| i.node_storage.retain(|n| n.node != target))?;
            format!("cleared injected storage conditions of node {target}")
        }
        ConformanceAction::Clear { scope, target } => {
            injection::update(state, |i| i.clear_volume(&target, Some(side(scope))))?;
            format!("cleared injected {scope:?} conditions of volume {target}")
        }
    })
}

/// A volume status number by its API name, or the number when it has none.
fn volume_status_name(raw: i32) -> String {
    VolumeStatus::from_csi(raw).map_or_else(|| raw.to_string(), |s| s.as_str().to_string())
}

/// A storage status number by its API name, or the number when it has none.
fn storage_status_name(raw: i32) -> String {
    StorageStatus::from_csi(raw).map_or_else(|| raw.to_string(), |s| s.as_str().to_string())
}

/// Adds the condition `status` (a CSI number), `reason`, `message` to what `side` reports for
/// `volume_id`.
fn add_volume_condition(
    state: &StateDir,
    volume_id: &str,
    side: Side,
    status: i32,
    reason: &str,
    message: String,
) -> Result<()> {
    let condition = Condition::new(status, reason, message);
    injection::update(state, |i| {
        i.add_volume(VolumeInjection {
            volume_id: volume_id.to_string(),
            side,
            condition,
        })
    })?;
    Ok(())
}

/// The storage condition `status` (its API name or number), `reason`, `message`, about the
/// access mode and volume mode named (`None`: every one).
fn storage_condition(
    status: &str,
    reason: &str,
    message: String,
    access_mode: Option<&str>,
    volume_mode: Option<&str>,
) -> Result<StorageCondition> {
    Ok(StorageCondition {
        status: injection::parse_storage_status(status)?,
        reason: reason.to_string(),
        message,
        access_mode: access_mode.map(injection::parse_access_mode).transpose()?,
        volume_mode: volume_mode.map(injection::parse_volume_mode).transpose()?,
    })
}

/// Adds `condition` to what the node plugin of `node` reports of its storage.
fn add_node_storage_condition(
    state: &StateDir,
    node: &str,
    condition: StorageCondition,
) -> Result<()> {
    injection::update(state, |i| {
        i.add_node_storage(NodeStorageInjection {
            node: node.to_string(),
            condition,
        })
    })?;
    Ok(())
}

/// Carries out one injection; returns the line that says what was done.
pub async fn run(args: InjectRequest) -> crate::Result<String> {
    inject(args).await.map_err(crate::Error::Inject)
}

async fn inject(args: InjectRequest) -> Result<String> {
    // Without --state-dir, the `up` in --dir, by default the one `up` makes in `.volhealth`.
    let dir = args
        .dir
        .clone()
        .or_else(|| args.state_dir.is_none().then(|| PathBuf::from(DEFAULT_DIR)));
    let state_dir = match (&args.state_dir, &dir) {
        (Some(s), _) => s.clone(),
        (None, Some(d)) => crate::up::resolve::state_dir(d).with_context(|| {
            if args.dir.is_none() {
                format!(
                    "no --dir given, so the default {DEFAULT_DIR} was used: pass --dir (the directory of a running `volhealth up`) or --state-dir (the state dir of a `volhealth driver`)"
                )
            } else {
                "--dir must be the directory of a running `volhealth up`".to_string()
            }
        })?,
        (None, None) => bail!("either --dir or --state-dir is required"),
    };
    let state = StateDir::new(&state_dir);
    let up_dir = || {
        dir.clone()
            .context("addressing a volume by PVC needs --dir (a running `volhealth up`)")
    };
    if let (
        Some(dir),
        Injection::Storage {
            node: Some(node), ..
        }
        | Injection::Clear {
            what: Clear::Storage { node: Some(node) },
        },
    ) = (&dir, &args.what)
    {
        crate::up::resolve::check_node(dir, node)?;
    }
    let done = match args.what {
        Injection::Pvc {
            claim,
            condition: c,
        } => {
            let status = injection::parse_volume_status(&c.status)?;
            let volume_id = crate::up::resolve::volume_handle(&up_dir()?, &claim).await?;
            add_volume_condition(&state, &volume_id, c.side, status, &c.reason, c.message)?;
            format!(
                "injected {:?} condition status={} reason={} on PVC {claim} (volume {volume_id})",
                c.side,
                volume_status_name(status),
                c.reason
            )
        }
        Injection::Volume {
            volume_id,
            condition: c,
        } => {
            let status = injection::parse_volume_status(&c.status)?;
            ensure!(!volume_id.is_empty(), "a volume id is required");
            add_volume_condition(&state, &volume_id, c.side, status, &c.reason, c.message)?;
            format!(
                "injected {:?} condition status={} reason={} on volume {volume_id}",
                c.side,
                volume_status_name(status),
                c.reason
            )
        }
        Injection::Storage {
            node,
            status,
            reason,
            message,
            access_mode,
            volume_mode,
        } => {
            let cond = storage_condition(
                &status,
                &reason,
                message,
                access_mode.as_deref(),
                volume_mode.as_deref(),
            )?;
            let status = storage_status_name(cond.status);
            match node {
                Some(node) => {
                    add_node_storage_condition(&state, &node, cond)?;
                    format!(
                        "injected storage condition status={status} reason={reason} on node {node}"
                    )
                }
                None => {
                    injection::update(&state, |i| i.add_storage(cond))?;
                    format!("injected storage condition status={status} reason={reason}")
                }
            }
        }
        Injection::Conformance { action } => conformance(&state, action)?,
        Injection::Clear { what } => match what {
            Clear::Volume { volume_id, side } => {
                injection::update(&state, |i| i.clear_volume(&volume_id, side))?;
                format!("cleared injected conditions of volume {volume_id}")
            }
            Clear::Pvc { claim, side } => {
                let volume_id = crate::up::resolve::volume_handle(&up_dir()?, &claim).await?;
                injection::update(&state, |i| i.clear_volume(&volume_id, side))?;
                format!("cleared injected conditions of PVC {claim} (volume {volume_id})")
            }
            Clear::Storage { node: Some(node) } => {
                injection::update(&state, |i| i.node_storage.retain(|n| n.node != node))?;
                format!("cleared injected storage conditions of node {node}")
            }
            Clear::Storage { node: None } => {
                injection::update(&state, |i| {
                    i.storage.clear();
                    i.node_storage.clear();
                })?;
                "cleared injected storage conditions".to_string()
            }
            Clear::Rpc { method } => {
                injection::update(&state, |i| {
                    i.rpc
                        .retain(|f| method.as_ref().is_some_and(|m| m != &f.method))
                })?;
                "cleared injected RPC faults".to_string()
            }
            Clear::All => {
                injection::update(&state, |i| *i = Default::default())?;
                "cleared all injections".to_string()
            }
        },
        Injection::Rpc {
            method,
            code,
            rate,
            delay,
            message,
        } => {
            ensure!(
                (0.0..=1.0).contains(&rate),
                "--rate must be within [0, 1], got {rate}"
            );
            let code = injection::parse_grpc_code(&code)?;
            let delay_ms = delay
                .as_deref()
                .map(parse_delay_ms)
                .transpose()?
                .unwrap_or(0);
            let fault = RpcFault {
                method: method.clone(),
                code,
                rate,
                delay_ms,
                message,
            };
            injection::update(&state, |i| i.set_fault(fault))?;
            format!("{method}: code {code} at rate {rate}, delay {delay_ms} ms")
        }
        Injection::ListChaos {
            duplicates,
            omissions,
            off,
        } => {
            let chaos = if off {
                ListChaos::default()
            } else {
                ListChaos {
                    duplicates,
                    omissions,
                }
            };
            injection::update(&state, |i| i.list_chaos = chaos)?;
            format!(
                "list chaos: duplicates={} omissions={}",
                chaos.duplicates, chaos.omissions
            )
        }
    };
    Ok(done)
}
