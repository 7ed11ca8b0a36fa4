//! Writing to the store: serialised decisions over the latest state, batches that share one
//! durable commit, and what a failed commit does to the batch.

use super::*;

impl Store {
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
