//! Injected conditions, RPC faults and list chaos, stored in `<state-dir>/injections.json`.
//!
//! `volhealth inject` changes the file (read-modify-write under a lock, replaced by rename) and a
//! running driver notices the change on its next RPC (see [`crate::injection_watch`]), so
//! injections need no restart and survive one.

use crate::condition::{Condition, StorageCondition, VolumeMode, storage_status, volume_status};
use crate::state::{StateDir, read_json, write_json};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// Which side of the driver reports an injected volume condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// ControllerGetVolumeHealth and ControllerListVolumeHealth.
    Controller,
    /// NodeGetVolumeHealth.
    Node,
}

/// An injected volume condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeInjection {
    /// The volume.
    pub volume_id: String,
    /// Which side reports it.
    pub side: Side,
    /// The condition (raw status number).
    #[serde(flatten)]
    pub condition: Condition,
}

/// An injected RPC fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcFault {
    /// gRPC method name, e.g. `ControllerListVolumeHealth`.
    pub method: String,
    /// gRPC status code number; 0 (OK) only delays.
    pub code: i32,
    /// Probability in [0, 1] that a call fails.
    pub rate: f64,
    /// Delay before answering, in milliseconds.
    pub delay_ms: u64,
    /// The failure's message, in place of the default `injected fault for METHOD` (a driver
    /// that echoes what it was sent, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Paging inconsistencies for ControllerListVolumeHealth (both permitted by the spec).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListChaos {
    /// Each page after the first repeats the last entry of the previous page.
    pub duplicates: bool,
    /// Each cycle leaves out a rotating fifth of the volumes (each appears again next cycle).
    pub omissions: bool,
}

/// A storage condition reported only by the node plugin whose node id is `node` (several node
/// plugins may share one state dir, as under `volhealth up`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStorageInjection {
    /// The node id (`--node-id`) of the plugin that reports it.
    pub node: String,
    /// The condition.
    #[serde(flatten)]
    pub condition: StorageCondition,
}

/// Everything injected into one state dir.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Injections {
    /// Volume conditions.
    #[serde(default)]
    pub volumes: Vec<VolumeInjection>,
    /// Storage backend conditions.
    #[serde(default)]
    pub storage: Vec<StorageCondition>,
    /// Storage backend conditions of one node only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_storage: Vec<NodeStorageInjection>,
    /// RPC faults, at most one per method.
    #[serde(default)]
    pub rpc: Vec<RpcFault>,
    /// List paging chaos.
    #[serde(default)]
    pub list_chaos: ListChaos,
}

impl Injections {
    /// Injected conditions of one volume on one side.
    pub fn volume_conditions(
        &self,
        volume_id: &str,
        side: Side,
    ) -> impl Iterator<Item = Condition> + '_ {
        let id = volume_id.to_string();
        self.volumes
            .iter()
            .filter(move |v| v.volume_id == id && v.side == side)
            .map(|v| v.condition.clone())
    }

    /// Injected storage conditions the node plugin of `node` reports: those for every node,
    /// then that node's own.
    pub fn storage_for(&self, node: &str) -> Vec<StorageCondition> {
        let own = self
            .node_storage
            .iter()
            .filter(|n| n.node == node)
            .map(|n| n.condition.clone());
        self.storage.iter().cloned().chain(own).collect()
    }

    /// Adds a storage condition for one node; one with the same node and key is replaced.
    pub fn add_node_storage(&mut self, inj: NodeStorageInjection) {
        let c = &inj.condition;
        self.node_storage.retain(|n| {
            !(n.node == inj.node
                && n.condition.status == c.status
                && n.condition.reason == c.reason
                && n.condition.access_mode == c.access_mode
                && n.condition.volume_mode == c.volume_mode)
        });
        self.node_storage.push(inj);
    }

    /// The fault of a method, if any.
    pub fn fault(&self, method: &str) -> Option<&RpcFault> {
        self.rpc.iter().find(|f| f.method == method)
    }

    /// Adds a volume condition; one with the same (volume, side, status, reason) is replaced.
    pub fn add_volume(&mut self, inj: VolumeInjection) {
        self.volumes.retain(|v| {
            !(v.volume_id == inj.volume_id
                && v.side == inj.side
                && v.condition.status == inj.condition.status
                && v.condition.reason == inj.condition.reason)
        });
        self.volumes.push(inj);
    }

    /// Adds a storage condition; one with the same key is replaced.
    pub fn add_storage(&mut self, cond: StorageCondition) {
        self.storage.retain(|s| {
            !(s.status == cond.status
                && s.reason == cond.reason
                && s.access_mode == cond.access_mode
                && s.volume_mode == cond.volume_mode)
        });
        self.storage.push(cond);
    }

    /// Sets the fault of a method; code 0 with no delay removes it.
    pub fn set_fault(&mut self, fault: RpcFault) {
        self.rpc.retain(|f| f.method != fault.method);
        if fault.code != 0 || fault.delay_ms > 0 {
            self.rpc.push(fault);
        }
    }

    /// Removes a volume's conditions (one side, or both).
    pub fn clear_volume(&mut self, volume_id: &str, side: Option<Side>) {
        self.volumes
            .retain(|v| !(v.volume_id == volume_id && side.is_none_or(|s| s == v.side)));
    }
}

/// Loads the injections of a state dir (none when the file does not exist).
pub fn load(state: &StateDir) -> Result<Injections> {
    Ok(read_json(&state.injections_path())?.unwrap_or_default())
}

/// Replaces the injections of a state dir atomically.
pub fn store(state: &StateDir, injections: &Injections) -> Result<()> {
    write_json(&state.injections_path(), injections)
}

/// Read-modify-write under an exclusive lock, so concurrent `inject` calls do not lose entries.
pub fn update<T>(state: &StateDir, change: impl FnOnce(&mut Injections) -> T) -> Result<T> {
    use volhealth_daemon::file_lock::{Held, lock_exclusive};
    std::fs::create_dir_all(state.root())
        .map_err(|e| Error::io("creating state dir", state.root(), e))?;
    let lock_path = state.injections_lock_path();
    let _lock =
        lock_exclusive(&lock_path, Held::Wait).map_err(|e| Error::io("locking", &lock_path, e))?;
    let mut inj = load(state)?;
    let out = change(&mut inj);
    store(state, &inj)?;
    Ok(out)
}

/// Parses a volume status: `Inaccessible`, `DataLoss`, `Degraded` or a raw number.
pub fn parse_volume_status(s: &str) -> Result<i32> {
    let names = [
        ("Inaccessible", volume_status::INACCESSIBLE),
        ("DataLoss", volume_status::DATA_LOSS),
        ("Degraded", volume_status::DEGRADED),
    ];
    parse_status("volume", s, &names)
}

/// Parses a storage status: `StorageUnreachable`, `StorageDegraded` or a raw number.
pub fn parse_storage_status(s: &str) -> Result<i32> {
    let names = [
        ("StorageUnreachable", storage_status::STORAGE_UNREACHABLE),
        ("StorageDegraded", storage_status::STORAGE_DEGRADED),
    ];
    parse_status("storage", s, &names)
}

/// A `kind` status: one of `names` or a raw number.
fn parse_status(kind: &str, s: &str, names: &[(&str, i32)]) -> Result<i32> {
    if let Some((_, number)) = names.iter().find(|(name, _)| *name == s) {
        return Ok(*number);
    }
    s.parse().map_err(|_| {
        let expected: Vec<&str> = names.iter().map(|(name, _)| *name).collect();
        Error::Invalid(format!(
            "{kind} status {s:?}: expected {} or a number",
            expected.join(", ")
        ))
    })
}

/// Parses an access mode: a Kubernetes name (`ReadWriteOnce`, ...) or a CSI name
/// (`SINGLE_NODE_WRITER`, ...), mapped to the CSI number the way the kubelet maps it.
pub fn parse_access_mode(s: &str) -> Result<i32> {
    let mode = match s {
        "ReadWriteOnce" | "SINGLE_NODE_WRITER" => 1,
        "SINGLE_NODE_READER_ONLY" => 2,
        "ReadOnlyMany" | "MULTI_NODE_READER_ONLY" => 3,
        "MULTI_NODE_SINGLE_WRITER" => 4,
        "ReadWriteMany" | "MULTI_NODE_MULTI_WRITER" => 5,
        "ReadWriteOncePod" | "SINGLE_NODE_SINGLE_WRITER" => 6,
        "SINGLE_NODE_MULTI_WRITER" => 7,
        other => {
            return Err(Error::Invalid(format!(
                "access mode {other:?}: expected ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod or a CSI mode name"
            )));
        }
    };
    Ok(mode)
}

/// Parses a volume mode: `Filesystem` or `Block`.
pub fn parse_volume_mode(s: &str) -> Result<VolumeMode> {
    match s {
        "Filesystem" => Ok(VolumeMode::Filesystem),
        "Block" => Ok(VolumeMode::Block),
        other => Err(Error::Invalid(format!(
            "volume mode {other:?}: expected Filesystem or Block"
        ))),
    }
}

/// gRPC code names in number order.
const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// Parses a gRPC code: a name (`UNAVAILABLE`, `Unavailable`, `DeadlineExceeded`) or a number 0..=16.
pub fn parse_grpc_code(s: &str) -> Result<i32> {
    if let Ok(n) = s.parse::<i32>() {
        if (0..=16).contains(&n) {
            return Ok(n);
        }
        return Err(Error::Invalid(format!(
            "gRPC code {n} is out of range 0..=16"
        )));
    }
    let norm: String = s
        .chars()
        .filter(|c| *c != '_')
        .flat_map(char::to_uppercase)
        .collect();
    CODE_NAMES
        .iter()
        .position(|name| name.replace('_', "") == norm)
        .map(|i| i as i32)
        .ok_or_else(|| Error::Invalid(format!("unknown gRPC code {s:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vol(id: &str, side: Side, status: i32, reason: &str) -> VolumeInjection {
        VolumeInjection {
            volume_id: id.into(),
            side,
            condition: Condition::new(status, reason, "m"),
        }
    }

    #[test]
    fn different_status_reason_add_entries_and_same_replaces() {
        let mut inj = Injections::default();
        inj.add_volume(vol("v", Side::Controller, 2, "A"));
        inj.add_volume(vol("v", Side::Controller, 1, "B"));
        inj.add_volume(vol("v", Side::Controller, 2, "A"));
        inj.add_volume(vol("v", Side::Node, 2, "A"));
        assert_eq!(inj.volume_conditions("v", Side::Controller).count(), 2);
        inj.clear_volume("v", Some(Side::Controller));
        assert_eq!(inj.volumes.len(), 1);
        inj.clear_volume("v", None);
        assert!(inj.volumes.is_empty());
    }

    #[test]
    fn node_storage_reaches_only_its_node() {
        let cond = |reason: &str| StorageCondition {
            status: 1,
            reason: reason.into(),
            message: "m".into(),
            access_mode: None,
            volume_mode: None,
        };
        let mut inj = Injections::default();
        inj.add_storage(cond("Everywhere"));
        inj.add_node_storage(NodeStorageInjection {
            node: "node-1".into(),
            condition: cond("OnlyOne"),
        });
        inj.add_node_storage(NodeStorageInjection {
            node: "node-1".into(),
            condition: cond("OnlyOne"),
        });
        let reasons = |node: &str| {
            inj.storage_for(node)
                .into_iter()
                .map(|c| c.reason)
                .collect::<Vec<_>>()
        };
        assert_eq!(reasons("node-1"), ["Everywhere", "OnlyOne"]);
        assert_eq!(reasons("node-2"), ["Everywhere"]);
        let text = serde_json::to_string(&Injections::default()).unwrap();
        assert!(
            !text.contains("node_storage"),
            "files without node injections keep their old shape"
        );
    }

    #[test]
    fn codes_and_statuses_parse_by_name_and_number() {
        let code: fn(&str) -> Result<i32> = parse_grpc_code;
        let volume: fn(&str) -> Result<i32> = parse_volume_status;
        let storage: fn(&str) -> Result<i32> = parse_storage_status;
        // (parser, input, the number it parses to or None for a refusal)
        for (parse, input, want) in [
            (code, "UNAVAILABLE", Some(14)),
            (code, "DeadlineExceeded", Some(4)),
            (code, "5", Some(5)),
            (code, "17", None),
            (code, "NOPE", None),
            (volume, "DataLoss", Some(3)),
            (volume, "42", Some(42)),
            (storage, "StorageUnreachable", Some(2)),
            (volume, "Broken", None),
        ] {
            assert_eq!(parse(input).ok(), want, "{input:?}");
        }
    }

    #[test]
    fn store_and_load_round_trip() {
        let (_dir, state) = StateDir::temp();
        update(&state, |i| i.add_volume(vol("v", Side::Node, 2, "A"))).unwrap();
        update(&state, |i| i.list_chaos.omissions = true).unwrap();
        let back = load(&state).unwrap();
        assert_eq!(back.volumes.len(), 1);
        assert!(back.list_chaos.omissions);
    }
}
