//! A watch that keeps one small record per object instead of the object: for a writer that
//! reads a few fields of thousands of objects. kube's reflector keeps every object whole (for a
//! PersistentVolume, several KiB of struct even when its fields are empty) and a second copy of
//! each key; here a caller turns each object into its own record as it arrives, or into nothing
//! when the object is of no interest, and the object is dropped at once.
//!
//! The cache follows the watch's list-then-watch protocol: a (re)list is collected apart and
//! replaces the cache only when complete, so a reader never sees half a list, and objects deleted
//! while the watch was down disappear with the relist.

use crate::watch::WatchKind;
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, RwLock, RwLockReadGuard};

/// The objects a list of a watch asks for at a time. Smaller than kube's default of 500, so the
/// response body and the objects decoded from it, which are held until the page is done, stay
/// small; a relist of 5,000 objects takes 50 requests instead of 10.
pub const LIST_PAGE_SIZE: u32 = 100;

/// The records of one watch, by key. Cheap to clone: clones share the cache.
#[derive(Debug)]
pub struct CompactStore<Q, R> {
    records: Arc<RwLock<HashMap<Q, R>>>,
    ready: tokio::sync::watch::Receiver<bool>,
}

impl<Q, R> Clone for CompactStore<Q, R> {
    fn clone(&self) -> Self {
        CompactStore {
            records: self.records.clone(),
            ready: self.ready.clone(),
        }
    }
}

impl<Q: Eq + Hash, R> CompactStore<Q, R> {
    /// The records as they are now (hold the guard briefly: the watch waits for it).
    pub fn read(&self) -> RwLockReadGuard<'_, HashMap<Q, R>> {
        // A poisoned lock means a reader panicked; the map itself is still whole.
        self.records.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the first complete list is in the cache; false if the watch ended before.
    pub async fn wait_until_ready(&self) -> bool {
        let mut rx = self.ready.clone();
        rx.wait_for(|r| *r).await.is_ok()
    }
}

/// Turns an object into its key and record, or None.
type CompactFn<K, Q, R> = Box<dyn Fn(K) -> Option<(Q, R)> + Send + Sync>;
/// Names an object, or None.
type KeyFn<K, Q> = Box<dyn Fn(&K) -> Option<Q> + Send + Sync>;

/// Applies watch events to a cache, turning objects into records with `compact`.
pub struct CompactWriter<K, Q, R> {
    records: Arc<RwLock<HashMap<Q, R>>>,
    ready: tokio::sync::watch::Sender<bool>,
    relist: Option<HashMap<Q, R>>,
    compact: CompactFn<K, Q, R>,
    key: KeyFn<K, Q>,
}

impl<K, Q: Eq + Hash, R> CompactWriter<K, Q, R> {
    /// A writer and the store it fills. `key` names an object (None: the object is malformed
    /// and ignored); `compact` makes its record, or None when the object is of no interest (a
    /// cached record of that key is then removed).
    pub fn new(
        key: impl Fn(&K) -> Option<Q> + Send + Sync + 'static,
        compact: impl Fn(K) -> Option<(Q, R)> + Send + Sync + 'static,
    ) -> (Self, CompactStore<Q, R>) {
        let records = Arc::new(RwLock::new(HashMap::new()));
        let (ready, ready_rx) = tokio::sync::watch::channel(false);
        let store = CompactStore {
            records: records.clone(),
            ready: ready_rx,
        };
        let writer = CompactWriter {
            records,
            ready,
            relist: None,
            compact: Box::new(compact),
            key: Box::new(key),
        };
        (writer, store)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Q, R>> {
        self.records.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one event of the watch.
    pub fn apply(&mut self, event: watcher::Event<K>) {
        match event {
            watcher::Event::Init => self.relist = Some(HashMap::new()),
            watcher::Event::InitApply(obj) => {
                if let Some((q, r)) = (self.compact)(obj) {
                    self.relist.get_or_insert_with(HashMap::new).insert(q, r);
                }
            }
            watcher::Event::InitDone => {
                let mut fresh = self.relist.take().unwrap_or_default();
                fresh.shrink_to_fit();
                *self.write() = fresh;
                self.ready.send_replace(true);
            }
            watcher::Event::Apply(obj) => {
                let Some(q) = (self.key)(&obj) else {
                    return;
                };
                match (self.compact)(obj) {
                    Some((q, r)) => {
                        self.write().insert(q, r);
                    }
                    None => {
                        self.write().remove(&q);
                    }
                }
            }
            watcher::Event::Delete(obj) => {
                if let Some(q) = (self.key)(&obj) {
                    self.write().remove(&q);
                }
            }
        }
    }
}

/// Watches every object of `api` into a [`CompactStore`] (see [`CompactWriter::new`] for `key`
/// and `compact`), retrying with backoff and logging failures as `what`; the watch runs until
/// the runtime stops.
pub fn spawn_compact_watch<K, Q, R>(
    api: kube::Api<K>,
    what: &'static str,
    key: impl Fn(&K) -> Option<Q> + Send + Sync + 'static,
    compact: impl Fn(K) -> Option<(Q, R)> + Send + Sync + 'static,
) -> CompactStore<Q, R>
where
    K: WatchKind,
    Q: Eq + Hash + Send + Sync + 'static,
    R: Send + Sync + 'static,
{
    let (mut writer, store) = CompactWriter::new(key, compact);
    let config = watcher::Config::default().page_size(LIST_PAGE_SIZE);
    crate::watch::spawn_watch_loop(watcher(api, config).default_backoff(), what, move |e| {
        writer.apply(e)
    });
    store
}

#[cfg(test)]
mod tests {
    use super::*;
    use watcher::Event;

    /// (name, value); value 0 means "of no interest".
    type Obj = (&'static str, u32);

    fn writer() -> (CompactWriter<Obj, String, u32>, CompactStore<String, u32>) {
        CompactWriter::new(
            |o: &Obj| Some(o.0.to_string()),
            |o: Obj| (o.1 != 0).then(|| (o.0.to_string(), o.1)),
        )
    }

    fn contents(s: &CompactStore<String, u32>) -> Vec<(String, u32)> {
        let mut v: Vec<_> = s.read().iter().map(|(k, v)| (k.clone(), *v)).collect();
        v.sort();
        v
    }

    #[tokio::test]
    async fn a_list_shows_only_when_complete_and_replaces_the_cache() {
        let (mut w, s) = writer();
        w.apply(Event::Init);
        w.apply(Event::InitApply(("a", 1)));
        w.apply(Event::InitApply(("b", 0)));
        assert!(contents(&s).is_empty(), "half a list is not shown");
        assert!(!*s.ready.borrow());
        w.apply(Event::InitDone);
        assert!(s.wait_until_ready().await);
        assert_eq!(contents(&s), vec![("a".into(), 1)]);

        // A relist after the watch was down: what it lacks was deleted meanwhile.
        w.apply(Event::Init);
        w.apply(Event::InitApply(("c", 3)));
        assert_eq!(contents(&s), vec![("a".into(), 1)], "old cache until done");
        w.apply(Event::InitDone);
        assert_eq!(contents(&s), vec![("c".into(), 3)]);
    }

    #[test]
    fn applies_and_deletes_follow_the_objects() {
        let (mut w, s) = writer();
        w.apply(Event::Init);
        w.apply(Event::InitDone);
        w.apply(Event::Apply(("a", 1)));
        w.apply(Event::Apply(("b", 2)));
        w.apply(Event::Apply(("a", 5)));
        assert_eq!(contents(&s), vec![("a".into(), 5), ("b".into(), 2)]);
        // Changed so that it is no longer of interest: its record goes.
        w.apply(Event::Apply(("b", 0)));
        w.apply(Event::Delete(("a", 5)));
        w.apply(Event::Delete(("never-seen", 1)));
        assert!(contents(&s).is_empty());
    }
}
