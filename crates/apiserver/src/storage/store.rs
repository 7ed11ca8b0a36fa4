//! Durable object store: SQLite (WAL, synchronous=FULL) holds the objects and the change log that
//! watches resume from; an in-memory copy serves reads; a broadcast channel feeds live watches.

mod integrity;
mod node_index;
mod open;
mod reads;
mod wal;
mod writes;

use crate::errors::{ApiError, Error, Result};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::broadcast;

/// The type of a change, as watch events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// The object was created.
    Added,
    /// The object was updated.
    Modified,
    /// The object was removed.
    Deleted,
}

impl ChangeKind {
    /// The watch event type.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }

    fn parse(s: &str) -> ChangeKind {
        match s {
            "ADDED" => ChangeKind::Added,
            "DELETED" => ChangeKind::Deleted,
            _ => ChangeKind::Modified,
        }
    }
}

/// One committed change of one object.
#[derive(Debug, Clone)]
pub struct Change {
    /// The resourceVersion it was committed at.
    pub rv: u64,
    /// Added, modified or deleted.
    pub kind: ChangeKind,
    /// The resource's store name (see `ResourceDef::store_name`).
    pub res: String,
    /// Namespace ("" for cluster-scoped).
    pub ns: String,
    /// Object name.
    pub name: String,
    /// The object after the change (for a delete: its last state with the new resourceVersion).
    pub object: Arc<Value>,
    /// The object before the change.
    pub prev: Option<Arc<Value>>,
}

/// What a mutation closure decided.
pub enum Outcome {
    /// Store this object.
    Put(Value),
    /// Remove the object.
    Delete,
    /// Nothing changes; answer with the current object.
    Unchanged,
}

/// The result of a committed mutation.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object after (None when deleted); for a delete, `deleted` holds the last state.
    pub new: Option<Arc<Value>>,
    /// The deleted object's last state, with the resourceVersion of the delete.
    pub deleted: Option<Arc<Value>>,
}

type Objects = HashMap<String, BTreeMap<(String, String), Arc<Value>>>;

struct Cache {
    rv: u64,
    compacted: u64,
    objects: Objects,
    /// (resource, `spec.nodeName`) → the (namespace, name) of the objects bound to that node, as
    /// kube-apiserver indexes pods for its Node authorizer: asking what a node's pods use must not
    /// cost a scan of every pod in the cluster.
    by_node: HashMap<(String, String), BTreeSet<(String, String)>>,
}

type Key = (String, String, String);

/// The write side: one SQLite connection with the batch (transaction) being filled.
struct Writer {
    conn: Connection,
    /// Whether a transaction is open for the current batch.
    open: bool,
    /// Number of the batch being filled.
    batch: u64,
    /// Last resourceVersion handed out (committed or pending).
    next_rv: u64,
    /// Compaction point including pending writes.
    compacted: u64,
    /// Objects written by the pending batch (None: deleted).
    overlay: HashMap<Key, Option<Arc<Value>>>,
    /// Changes of the pending batch, in resourceVersion order.
    pending: Vec<Arc<Change>>,
    /// Batches whose commit failed, with the reason.
    failed: HashMap<u64, String>,
}

/// The store. Decisions are serialised; concurrent writes share one commit (group commit), and
/// nobody is answered, and no watcher or reader sees a write, before its commit is durable.
/// Readers use the in-memory copy of committed objects.
pub struct Store {
    /// The database file, for error messages.
    path: String,
    writer: Mutex<Writer>,
    /// Held by whoever commits a batch, so batches finish in order.
    committer: Mutex<()>,
    cache: RwLock<Cache>,
    events: broadcast::Sender<Arc<Change>>,
    retain: u64,
}

fn db<T>(what: &str, r: rusqlite::Result<T>) -> Result<T> {
    r.map_err(|source| Error::Store {
        what: what.to_string(),
        source,
    })
}

fn poisoned<E>(_: E) -> ApiError {
    ApiError::from(Error::Poisoned("writing to the store"))
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
mod tests;
