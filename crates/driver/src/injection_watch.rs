//! A running driver's view of the injections file: re-read only when the file changed, and the
//! file looked at no more often than every [`POLL_INTERVAL`], so an RPC pays at most one stat.

use crate::injection::{self, Injections};
use crate::state::StateDir;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest an injection waits before a running driver sees it.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Identity of one version of the file: a rename changes the inode even within one mtime tick.
type Stamp = Option<(u64, i64, i64, u64)>;

struct Cached {
    checked: Option<Instant>,
    stamp: Stamp,
    value: Arc<Injections>,
}

/// Cached, self-refreshing injections of one state dir.
pub struct InjectionWatch {
    state: StateDir,
    cached: Mutex<Cached>,
}

impl InjectionWatch {
    /// Starts watching (the file is read on first use).
    pub fn new(state: StateDir) -> Self {
        InjectionWatch {
            state,
            cached: Mutex::new(Cached {
                checked: None,
                stamp: None,
                value: Arc::default(),
            }),
        }
    }

    /// The injections in force now.
    pub fn current(&self) -> Arc<Injections> {
        self.current_at(Instant::now())
    }

    /// The injections in force at `now` (time passed in so tests need not sleep).
    pub fn current_at(&self, now: Instant) -> Arc<Injections> {
        let mut cached = match self.cached.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if cached
            .checked
            .is_some_and(|t| now.saturating_duration_since(t) < POLL_INTERVAL)
        {
            return cached.value.clone();
        }
        cached.checked = Some(now);
        let path = self.state.injections_path();
        let stamp: Stamp = std::fs::metadata(&path)
            .ok()
            .map(|m| (m.ino(), m.mtime(), m.mtime_nsec(), m.len()));
        if stamp == cached.stamp {
            return cached.value.clone();
        }
        match injection::load(&self.state) {
            Ok(value) => {
                tracing::info!(
                    volume_conditions = value.volumes.len(),
                    storage_conditions = value.storage.len() + value.node_storage.len(),
                    rpc_faults = value.rpc.len(),
                    duplicates = value.list_chaos.duplicates,
                    omissions = value.list_chaos.omissions,
                    "injections changed"
                );
                cached.stamp = stamp;
                cached.value = Arc::new(value);
            }
            // Keep the last good view; a half-written file cannot happen (rename), a hand-edited
            // broken one should not erase what was injected.
            Err(e) => tracing::warn!(error = %e, "ignoring unreadable injections file"),
        }
        cached.value.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::injection::ListChaos;

    #[test]
    fn changes_are_seen_after_the_poll_interval_only() {
        let (_dir, state) = StateDir::temp();
        let watch = InjectionWatch::new(state.clone());
        let t0 = Instant::now();
        assert!(!watch.current_at(t0).list_chaos.duplicates);
        injection::update(&state, |i| {
            i.list_chaos = ListChaos {
                duplicates: true,
                omissions: false,
            }
        })
        .unwrap();
        assert!(
            !watch
                .current_at(t0 + Duration::from_millis(50))
                .list_chaos
                .duplicates
        );
        assert!(
            watch
                .current_at(t0 + POLL_INTERVAL + Duration::from_millis(1))
                .list_chaos
                .duplicates
        );
    }
}
