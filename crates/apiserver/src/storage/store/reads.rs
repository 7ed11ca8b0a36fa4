//! Reading the store: committed objects from the in-memory copy, live changes, and the
//! retained change log that watches resume from.

use super::*;

impl Store {
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
}
