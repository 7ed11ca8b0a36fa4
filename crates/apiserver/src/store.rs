//! Durable object store: SQLite (WAL, synchronous=FULL) holds the objects and the change log that
//! watches resume from; an in-memory copy serves reads; a broadcast channel feeds live watches.

use crate::errors::{ApiError, Error, Result};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
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
    /// The object before.
    pub old: Option<Arc<Value>>,
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
}

/// The store. Writers are serialised; readers use the in-memory copy.
pub struct Store {
    conn: Mutex<Connection>,
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
        let conn = db(
            &format!("opening {}", path.display()),
            Connection::open(&path),
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
        let (events, _) = broadcast::channel(4096);
        Ok(Store {
            conn: Mutex::new(conn),
            cache: RwLock::new(Cache {
                rv,
                compacted,
                objects,
            }),
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
        let conn = self
            .conn
            .lock()
            .map_err(|_| Error::Poisoned("reading the change log"))?;
        let mut stmt = db(
            "reading the change log",
            conn.prepare_cached(
                "SELECT rv, type, ns, name, json, prev FROM changes WHERE res = ?1 AND rv > ?2 ORDER BY rv",
            ),
        )?;
        let rows = db(
            "reading the change log",
            stmt.query_map(params![res, after as i64], |r| {
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
                serde_json::from_str::<Value>(s).map_err(|source| Error::Json {
                    what: format!("decoding change {rv}"),
                    source,
                })
            };
            out.push(Change {
                rv: rv as u64,
                kind: ChangeKind::parse(&kind),
                res: res.to_string(),
                ns,
                name,
                object: Arc::new(decode(&json)?),
                prev: match prev {
                    Some(p) => Some(Arc::new(decode(&p)?)),
                    None => None,
                },
            });
        }
        // A compaction may have run between the check above and the read.
        if after < self.compacted() {
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// Reads the current object, lets `decide` choose the outcome, and commits it durably before
    /// returning. Writers are serialised, so `decide` sees the latest state.
    pub fn mutate(
        &self,
        res: &str,
        ns: &str,
        name: &str,
        decide: impl FnOnce(Option<&Value>) -> std::result::Result<Outcome, ApiError>,
    ) -> std::result::Result<Written, ApiError> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| ApiError::from(Error::Poisoned("writing")))?;
        let old = self.get(res, ns, name);
        let outcome = decide(old.as_deref())?;
        let (mut rv, compacted) = {
            let c = self
                .cache
                .read()
                .map_err(|_| ApiError::from(Error::Poisoned("writing")))?;
            (c.rv, c.compacted)
        };
        let (kind, object) = match outcome {
            Outcome::Unchanged => {
                return Ok(Written {
                    new: old.clone(),
                    old,
                    deleted: None,
                });
            }
            Outcome::Delete => match &old {
                None => {
                    return Ok(Written {
                        old: None,
                        new: None,
                        deleted: None,
                    });
                }
                Some(o) => (ChangeKind::Deleted, (**o).clone()),
            },
            Outcome::Put(v) => (
                if old.is_some() {
                    ChangeKind::Modified
                } else {
                    ChangeKind::Added
                },
                v,
            ),
        };
        rv += 1;
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
        let new_compacted = if rv % 256 == 0 && rv > self.retain {
            rv - self.retain
        } else {
            compacted
        };
        let commit = || -> rusqlite::Result<()> {
            let tx = conn.unchecked_transaction()?;
            if kind == ChangeKind::Deleted {
                tx.execute(
                    "DELETE FROM objects WHERE res = ?1 AND ns = ?2 AND name = ?3",
                    params![res, ns, name],
                )?;
            } else {
                tx.execute(
                    "INSERT OR REPLACE INTO objects (res, ns, name, rv, json) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![res, ns, name, rv as i64, json],
                )?;
            }
            tx.execute(
                "INSERT INTO changes (rv, type, res, ns, name, json, prev) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![rv as i64, kind.as_str(), res, ns, name, json, prev_json],
            )?;
            tx.execute(
                "INSERT OR REPLACE INTO meta (name, value) VALUES ('rv', ?1)",
                [rv as i64],
            )?;
            if new_compacted > compacted {
                tx.execute("DELETE FROM changes WHERE rv <= ?1", [new_compacted as i64])?;
                tx.execute(
                    "INSERT OR REPLACE INTO meta (name, value) VALUES ('compacted', ?1)",
                    [new_compacted as i64],
                )?;
            }
            tx.commit()
        };
        commit().map_err(|e| ApiError::internal(format!("committing {res} {ns}/{name}: {e}")))?;
        let object = Arc::new(object);
        {
            let mut c = self
                .cache
                .write()
                .map_err(|_| ApiError::from(Error::Poisoned("writing")))?;
            c.rv = rv;
            c.compacted = new_compacted;
            let map = c.objects.entry(res.to_string()).or_default();
            if kind == ChangeKind::Deleted {
                map.remove(&(ns.to_string(), name.to_string()));
            } else {
                map.insert((ns.to_string(), name.to_string()), object.clone());
            }
        }
        // Sent while the writer lock is held so that live events arrive in resourceVersion order.
        let _ = self.events.send(Arc::new(Change {
            rv,
            kind,
            res: res.to_string(),
            ns: ns.to_string(),
            name: name.to_string(),
            object: object.clone(),
            prev: old.clone(),
        }));
        drop(conn);
        Ok(if kind == ChangeKind::Deleted {
            Written {
                old,
                new: None,
                deleted: Some(object),
            }
        } else {
            Written {
                old,
                new: Some(object),
                deleted: None,
            }
        })
    }
}
