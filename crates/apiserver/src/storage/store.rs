//! Durable object store: SQLite (WAL, synchronous=FULL) holds the objects and the change log that
//! watches resume from; an in-memory copy serves reads; a broadcast channel feeds live watches.

mod integrity;
mod node_index;
mod wal;

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

impl Store {
    /// Opens (or creates) the store in `dir`, keeping at least `retain` changes for watch resume.
    pub fn open(dir: &Path, retain: u64) -> Result<Store> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            what: format!("creating data dir {}", dir.display()),
            source,
        })?;
        let path = dir.join("apiserver.sqlite");
        integrity::refuse_truncated(&path)?;
        // Before SQLite opens it, which ignores an invalid WAL without a word.
        wal::check(&path);
        Store::open_file(&path, retain).map_err(|e| integrity::name_corruption(&path, e))
    }

    fn open_file(path: &Path, retain: u64) -> Result<Store> {
        let conn = db(
            &format!("opening {}", path.display()),
            Connection::open(path),
        )?;
        db(
            "configuring SQLite",
            conn.execute_batch(
                "PRAGMA journal_mode=WAL;
                 PRAGMA synchronous=FULL;
                 CREATE TABLE IF NOT EXISTS objects (res TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL,
                     rv INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY (res, ns, name)) WITHOUT ROWID;
                 CREATE TABLE IF NOT EXISTS changes (rv INTEGER PRIMARY KEY, type TEXT NOT NULL, res TEXT NOT NULL,
                     ns TEXT NOT NULL, name TEXT NOT NULL, json TEXT NOT NULL, prev TEXT);
                 CREATE INDEX IF NOT EXISTS changes_res ON changes (res, rv);
                 CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);",
            ),
        )?;
        let meta = |name: &str| -> Result<u64> {
            let v: Option<i64> = db(
                "reading store metadata",
                conn.query_row("SELECT value FROM meta WHERE name = ?1", [name], |r| {
                    r.get(0)
                })
                .optional(),
            )?;
            Ok(v.unwrap_or(0).max(0) as u64)
        };
        let rv = meta("rv")?;
        let compacted = meta("compacted")?;
        let mut objects: Objects = HashMap::new();
        {
            let mut stmt = db(
                "reading objects",
                conn.prepare("SELECT res, ns, name, json FROM objects"),
            )?;
            let rows = db(
                "reading objects",
                stmt.query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                }),
            )?;
            for row in rows {
                let (res, ns, name, json) = db("reading an object", row)?;
                let v: Value = serde_json::from_str(&json).map_err(|source| Error::Json {
                    what: format!("decoding stored {res} {ns}/{name}"),
                    source,
                })?;
                objects
                    .entry(res)
                    .or_default()
                    .insert((ns, name), Arc::new(v));
            }
        }
        let mut cache = Cache {
            rv,
            compacted,
            objects: HashMap::new(),
            by_node: HashMap::new(),
        };
        for (res, items) in &objects {
            for (key, v) in items {
                cache.index(res, key, None, Some(v));
            }
        }
        cache.objects = objects;
        let (events, _) = broadcast::channel(4096);
        Ok(Store {
            path: path.display().to_string(),
            writer: Mutex::new(Writer {
                conn,
                open: false,
                batch: 0,
                next_rv: rv,
                compacted,
                overlay: HashMap::new(),
                pending: Vec::new(),
                failed: HashMap::new(),
            }),
            committer: Mutex::new(()),
            cache: RwLock::new(cache),
            events,
            retain: retain.max(16),
        })
    }

    /// The latest committed resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.cache.read().map(|c| c.rv).unwrap_or(0)
    }

    /// The highest resourceVersion whose change is no longer retained.
    pub fn compacted(&self) -> u64 {
        self.cache.read().map(|c| c.compacted).unwrap_or(0)
    }

    /// One object.
    pub fn get(&self, res: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
        let c = self.cache.read().ok()?;
        c.objects
            .get(res)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// All objects of a resource (in one namespace when `ns` is Some), with the current resourceVersion.
    pub fn list(&self, res: &str, ns: Option<&str>) -> (u64, Vec<Arc<Value>>) {
        let Ok(c) = self.cache.read() else {
            return (0, Vec::new());
        };
        let items = match c.objects.get(res) {
            None => Vec::new(),
            Some(m) => match ns {
                None => m.values().cloned().collect(),
                Some(ns) => m
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect(),
            },
        };
        (c.rv, items)
    }

    /// Live changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.events.subscribe()
    }

    /// Retained changes of `res` with resourceVersion above `after`, oldest first; None when some
    /// of them were compacted away.
    pub fn changes_since(&self, res: &str, after: u64) -> Result<Option<Vec<Change>>> {
        if after < self.compacted() {
            return Ok(None);
        }
        let writer = self
            .writer
            .lock()
            .map_err(|_| Error::Poisoned("reading the change log"))?;
        // The connection may hold an uncommitted batch: read only what is committed.
        let committed = self.current_rv();
        let mut stmt = db(
            "reading the change log",
            writer.conn.prepare_cached(
                "SELECT rv, type, ns, name, json, prev FROM changes WHERE res = ?1 AND rv > ?2 AND rv <= ?3 ORDER BY rv",
            ),
        )?;
        let rows = db(
            "reading the change log",
            stmt.query_map(params![res, after as i64, committed as i64], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                ))
            }),
        )?;
        let mut out = Vec::new();
        for row in rows {
            let (rv, kind, ns, name, json, prev) = db("reading a change", row)?;
            let decode = |s: &str| {
                serde_json::from_str::<Value>(s).map_err(|e| Error::Corrupt {
                    path: self.path.clone(),
                    reason: format!("change-log row {rv} ({res} {ns}/{name}) does not decode: {e}"),
                })
            };
            let object = Arc::new(decode(&json)?);
            let prev = match prev {
                Some(p) => Some(Arc::new(decode(&p)?)),
                None => None,
            };
            out.push(Change {
                rv: rv as u64,
                kind: ChangeKind::parse(&kind),
                res: res.to_string(),
                ns,
                name,
                object,
                prev,
            });
        }
        // A compaction may have run between the check above and the read.
        if after < self.compacted() {
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// Reads the current object, lets `decide` choose the outcome, and returns once the change
    /// is durable. Decisions are serialised, so `decide` sees the latest state, including writes
    /// of the batch not yet committed.
    pub fn mutate(
        &self,
        res: &str,
        ns: &str,
        name: &str,
        decide: impl FnOnce(Option<&Value>) -> std::result::Result<Outcome, ApiError>,
    ) -> std::result::Result<Written, ApiError> {
        let mut w = self.writer.lock().map_err(poisoned)?;
        let key: Key = (res.to_string(), ns.to_string(), name.to_string());
        let pending_key = w.overlay.contains_key(&key);
        let old = match w.overlay.get(&key) {
            Some(v) => v.clone(),
            None => self.get(res, ns, name),
        };
        let outcome = decide(old.as_deref())?;
        let (kind, object) = match (outcome, &old) {
            (Outcome::Put(v), _) => (
                if old.is_some() {
                    ChangeKind::Modified
                } else {
                    ChangeKind::Added
                },
                v,
            ),
            (Outcome::Delete, Some(o)) => (ChangeKind::Deleted, (**o).clone()),
            (Outcome::Delete, None) | (Outcome::Unchanged, _) => {
                // Answering with a state that is not durable yet must wait for its commit.
                let batch = w.batch;
                drop(w);
                if pending_key {
                    self.wait_commit(batch)?;
                }
                return Ok(Written {
                    new: old,
                    deleted: None,
                });
            }
        };
        if !w.open {
            let committed = self.cache.read().map_err(poisoned)?;
            w.next_rv = committed.rv;
            w.compacted = committed.compacted;
            drop(committed);
            w.conn
                .execute_batch("BEGIN IMMEDIATE")
                .map_err(|e| ApiError::internal(format!("starting a write transaction: {e}")))?;
            w.open = true;
        }
        let rv = w.next_rv + 1;
        let mut object = object;
        set_rv(&mut object, rv);
        let json = serde_json::to_string(&object)
            .map_err(|e| ApiError::internal(format!("encoding {res} {ns}/{name}: {e}")))?;
        let prev_json = match &old {
            Some(o) => {
                Some(serde_json::to_string(&**o).map_err(|e| ApiError::internal(e.to_string()))?)
            }
            None => None,
        };
        let compact_to = if rv % 256 == 0 && rv > self.retain {
            rv - self.retain
        } else {
            w.compacted
        };
        let write = |conn: &Connection| -> rusqlite::Result<()> {
            if kind == ChangeKind::Deleted {
                conn.prepare_cached(
                    "DELETE FROM objects WHERE res = ?1 AND ns = ?2 AND name = ?3",
                )?
                .execute(params![res, ns, name])?;
            } else {
                conn.prepare_cached("INSERT OR REPLACE INTO objects (res, ns, name, rv, json) VALUES (?1, ?2, ?3, ?4, ?5)")?
                    .execute(params![res, ns, name, rv as i64, json])?;
            }
            conn.prepare_cached("INSERT INTO changes (rv, type, res, ns, name, json, prev) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?
                .execute(params![rv as i64, kind.as_str(), res, ns, name, json, prev_json])?;
            conn.prepare_cached("INSERT OR REPLACE INTO meta (name, value) VALUES ('rv', ?1)")?
                .execute([rv as i64])?;
            Ok(())
        };
        let compact = |conn: &Connection| -> rusqlite::Result<()> {
            conn.execute("DELETE FROM changes WHERE rv <= ?1", [compact_to as i64])?;
            conn.execute(
                "INSERT OR REPLACE INTO meta (name, value) VALUES ('compacted', ?1)",
                [compact_to as i64],
            )?;
            Ok(())
        };
        let written = write(&w.conn).and_then(|_| {
            if compact_to > w.compacted {
                compact(&w.conn)
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            let reason = format!("writing {res} {ns}/{name}: {e}");
            self.abort(&mut w, &reason);
            return Err(ApiError::internal(reason));
        }
        w.next_rv = rv;
        w.compacted = compact_to;
        let object = Arc::new(object);
        let stored = (kind != ChangeKind::Deleted).then(|| object.clone());
        w.overlay.insert(key, stored);
        w.pending.push(Arc::new(Change {
            rv,
            kind,
            res: res.to_string(),
            ns: ns.to_string(),
            name: name.to_string(),
            object: object.clone(),
            prev: old.clone(),
        }));
        let batch = w.batch;
        drop(w);
        self.wait_commit(batch)?;
        Ok(if kind == ChangeKind::Deleted {
            Written {
                new: None,
                deleted: Some(object),
            }
        } else {
            Written {
                new: Some(object),
                deleted: None,
            }
        })
    }

    /// Rolls the open batch back and fails everyone waiting on it.
    fn abort(&self, w: &mut Writer, reason: &str) {
        if w.open {
            let _ = w.conn.execute_batch("ROLLBACK");
        }
        let batch = w.batch;
        w.failed.insert(batch, reason.to_string());
        w.open = false;
        w.overlay.clear();
        w.pending.clear();
        w.batch += 1;
    }

    /// Returns once `batch` is committed (committing it, with every write that joined it, when
    /// nobody else is), or fails when its commit failed.
    fn wait_commit(&self, batch: u64) -> std::result::Result<(), ApiError> {
        let _committing = self.committer.lock().map_err(poisoned)?;
        let mut w = self.writer.lock().map_err(poisoned)?;
        if w.batch == batch && w.open {
            match w.conn.execute_batch("COMMIT") {
                Ok(()) => {
                    let changes = std::mem::take(&mut w.pending);
                    let mut c = self.cache.write().map_err(poisoned)?;
                    c.rv = w.next_rv;
                    c.compacted = w.compacted;
                    for ch in &changes {
                        let map = c.objects.entry(ch.res.clone()).or_default();
                        let k = (ch.ns.clone(), ch.name.clone());
                        let after = if ch.kind == ChangeKind::Deleted {
                            map.remove(&k);
                            None
                        } else {
                            map.insert(k.clone(), ch.object.clone());
                            Some(ch.object.clone())
                        };
                        c.index(&ch.res, &k, ch.prev.as_deref(), after.as_deref());
                    }
                    drop(c);
                    // Sent under the writer lock so live events arrive in resourceVersion order.
                    for ch in changes {
                        let _ = self.events.send(ch);
                    }
                    w.open = false;
                    w.overlay.clear();
                    w.batch += 1;
                }
                Err(e) => {
                    let reason = format!("committing: {e}");
                    self.abort(&mut w, &reason);
                }
            }
        }
        match w.failed.get(&batch) {
            Some(reason) => Err(ApiError::internal(reason.clone())),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn concurrent_writers_share_commits_in_order_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path(), 100_000).unwrap());
        let mut live = store.subscribe();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut rvs = Vec::new();
                    for i in 0..40 {
                        // Half of the writes go to one shared object, so batches see each other's
                        // uncommitted state.
                        let name = if i % 2 == 0 {
                            "shared".to_string()
                        } else {
                            format!("t{t}-{i}")
                        };
                        let w = store
                            .mutate("pods", "default", &name, |old| {
                                let n = old.and_then(|o| o["n"].as_i64()).unwrap_or(0);
                                Ok(Outcome::Put(
                                    json!({"metadata": {"name": name}, "n": n + 1}),
                                ))
                            })
                            .unwrap();
                        let rv: u64 = w.new.unwrap()["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap()
                            .parse()
                            .unwrap();
                        rvs.push(rv);
                    }
                    rvs
                })
            })
            .collect();
        let mut all: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 320, "every write got its own resourceVersion");
        assert_eq!(store.current_rv(), 320);
        let mut seen = Vec::new();
        while let Ok(c) = live.try_recv() {
            seen.push(c.rv);
        }
        assert_eq!(seen, (1..=320).collect::<Vec<_>>(), "live events in order");
        assert_eq!(
            store.get("pods", "default", "shared").unwrap()["n"],
            160,
            "no lost update"
        );
        drop(store);
        let reopened = Store::open(dir.path(), 100_000).unwrap();
        assert_eq!(reopened.current_rv(), 320);
        assert_eq!(reopened.list("pods", Some("default")).1.len(), 1 + 8 * 20);
        assert_eq!(
            reopened.changes_since("pods", 0).unwrap().unwrap().len(),
            320
        );
    }
}
