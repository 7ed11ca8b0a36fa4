//! Opening the store: the data directory, the checks before SQLite sees the file, the schema
//! and the in-memory copy loaded from it.

use super::*;

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
}
