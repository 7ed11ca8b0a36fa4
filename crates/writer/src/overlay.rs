//! What a writer knows that its watch cache may not show yet: its own recent writes. While the
//! cache lags behind a write, the write's result is the stored value, so a lagging cache never
//! causes the same write twice, nor a second write that moves `lastTransitionTime`.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;
use tokio::time::Instant;

/// After this long a recent write no longer overrides the cache, even if the cache never showed it.
pub const RECENT_WRITE_TTL: Duration = Duration::from_secs(300);

#[derive(Debug, Clone)]
struct Recent<V> {
    rv_before: Option<String>,
    rv_after: Option<String>,
    value: V,
    at: Instant,
    /// Which write this was (numbered from 1 in the order they were recorded).
    seq: u64,
}

/// Whether a cached copy at `seen` predates a write that went from `before` to `after`.
fn predates(seen: Option<&str>, before: Option<&str>, after: Option<&str>) -> bool {
    if seen == after {
        return false;
    }
    let number = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok());
    match (number(seen), number(after)) {
        (Some(seen), Some(after)) => seen < after,
        // Opaque versions cannot be ordered: only the copy the write was based on is known to be
        // older; any other version is a later change by someone else, so the cache wins.
        _ => seen == before,
    }
}

/// The own-writes overlay, keyed by object.
#[derive(Debug)]
pub struct OwnWrites<K, V> {
    recent: HashMap<K, Recent<V>>,
    recorded: u64,
    /// How often the overlay was read (for the offer path's counting test).
    #[cfg(test)]
    pub(crate) reads: usize,
}

impl<K, V> Default for OwnWrites<K, V> {
    fn default() -> Self {
        OwnWrites {
            recent: HashMap::new(),
            recorded: 0,
            #[cfg(test)]
            reads: 0,
        }
    }
}

impl<K: Clone + Eq + Hash, V: Clone> OwnWrites<K, V> {
    /// An empty overlay.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value stored now: our own write while the cache (at `cached_rv`, showing `cached`)
    /// has not caught up with it, else the cached value.
    pub fn effective(&mut self, key: &K, cached_rv: Option<&str>, cached: &V) -> V {
        #[cfg(test)]
        {
            self.reads += 1;
        }
        if let Some(r) = self.recent.get(key) {
            let fresh = r.at.elapsed() < RECENT_WRITE_TTL;
            if fresh && predates(cached_rv, r.rv_before.as_deref(), r.rv_after.as_deref()) {
                return r.value.clone();
            }
            self.recent.remove(key);
        }
        cached.clone()
    }

    /// Remembers a write based on the copy at `rv_before` that stored `value` at `rv_after`.
    pub fn record(
        &mut self,
        key: &K,
        rv_before: Option<String>,
        rv_after: Option<String>,
        value: V,
    ) {
        self.recorded += 1;
        self.recent.insert(
            key.clone(),
            Recent {
                rv_before,
                rv_after,
                value,
                at: Instant::now(),
                seq: self.recorded,
            },
        );
    }

    /// The number of our write of `key` that still overrides the cache as of the last
    /// [`OwnWrites::effective`], or 0 when none does.
    pub fn generation(&self, key: &K) -> u64 {
        self.recent
            .get(key)
            .filter(|r| r.at.elapsed() < RECENT_WRITE_TTL)
            .map_or(0, |r| r.seq)
    }

    /// Forgets objects that no longer exist.
    pub fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        self.recent.retain(|k, _| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn own_write_wins_until_the_cache_catches_up() {
        let mut o = OwnWrites::new();
        o.record(&"k", Some("5".into()), Some("7".into()), "A");
        assert_eq!(o.effective(&"k", Some("5"), &"old"), "A");
        assert_eq!(o.effective(&"k", Some("6"), &"old"), "A");
        assert_eq!(o.effective(&"k", Some("7"), &"A"), "A");
        // Caught up: the cache is the truth from now on, also when someone else changes it.
        assert_eq!(o.effective(&"k", Some("9"), &"B"), "B");
    }

    #[test]
    fn a_write_is_newer_than_the_copies_before_it() {
        let p = |seen| predates(Some(seen), Some("5"), Some("9"));
        assert!(p("5"));
        assert!(
            p("7"),
            "an update between our read and our write is still older"
        );
        assert!(!p("9"));
        assert!(!p("12"));
        let opaque = |seen| predates(Some(seen), Some("a"), Some("c"));
        assert!(opaque("a"));
        assert!(!opaque("b"));
        assert!(!opaque("c"));
    }

    #[tokio::test(start_paused = true)]
    async fn opaque_versions_and_expiry() {
        let mut o = OwnWrites::new();
        o.record(&"k", Some("x".into()), Some("y".into()), "A");
        assert_eq!(o.effective(&"k", Some("x"), &"old"), "A");
        assert_eq!(
            o.effective(&"k", Some("z"), &"B"),
            "B",
            "a later change by someone else"
        );
        o.record(&"k", Some("x".into()), Some("y".into()), "A");
        tokio::time::advance(RECENT_WRITE_TTL).await;
        assert_eq!(o.effective(&"k", Some("x"), &"old"), "old");
    }
}
