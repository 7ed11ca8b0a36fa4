//! What the writer knows that the cache may not show yet: its own recent writes (so a lagging
//! cache never causes the same write twice) and claims whose writes the API server dropped.

use crate::claims::{ClaimKey, StoredClaim};
use crate::status_writer::Patched;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;
use volhealth_model::VolumeHealthStatus;

/// After this long a recent write no longer overrides the cache, even if the cache never showed it.
const RECENT_WRITE_TTL: Duration = Duration::from_secs(300);

#[derive(Debug, Clone)]
struct RecentWrite {
    resource_version: Option<String>,
    health: Option<VolumeHealthStatus>,
    at: Instant,
}

/// Shared between the probe cycles (readers) and the writer.
#[derive(Debug, Default)]
pub struct WriteState {
    recent: HashMap<ClaimKey, RecentWrite>,
    dropped_until: HashMap<ClaimKey, Instant>,
    dropped_logged: bool,
}

/// Whether the cache's `seen` resourceVersion is at least our write's `written` one.
fn caught_up(seen: Option<&str>, written: Option<&str>) -> bool {
    match (seen, written) {
        (Some(s), Some(w)) if s == w => true,
        (Some(s), Some(w)) => match (s.parse::<u64>(), w.parse::<u64>()) {
            (Ok(s), Ok(w)) => s >= w,
            // Opaque versions: any different one is a later change by someone (ours is not seen yet
            // only while the cache still shows the version we patched over, which the TTL bounds).
            _ => false,
        },
        _ => false,
    }
}

impl WriteState {
    /// The claim's health as it is stored now: our own write while the cache lags behind it.
    pub fn effective(
        &mut self,
        key: &ClaimKey,
        stored: &StoredClaim,
    ) -> Option<VolumeHealthStatus> {
        if let Some(r) = self.recent.get(key) {
            let fresh = r.at.elapsed() < RECENT_WRITE_TTL;
            if fresh
                && !caught_up(
                    stored.resource_version.as_deref(),
                    r.resource_version.as_deref(),
                )
            {
                return r.health.clone();
            }
            self.recent.remove(key);
        }
        stored.health.clone()
    }

    /// Remembers what a successful patch stored.
    pub fn record(&mut self, key: &ClaimKey, patched: &Patched) {
        self.recent.insert(
            key.clone(),
            RecentWrite {
                resource_version: patched.resource_version.clone(),
                health: patched.health.clone(),
                at: Instant::now(),
            },
        );
    }

    /// Holds further writes of the claim back until `until`; returns whether this is the first such hold.
    pub fn hold(&mut self, key: &ClaimKey, until: Instant) -> bool {
        self.dropped_until.insert(key.clone(), until).is_none()
    }

    /// Whether writes of the claim are held back now.
    pub fn is_held(&mut self, key: &ClaimKey) -> bool {
        self.dropped_until
            .get(key)
            .is_some_and(|until| Instant::now() < *until)
    }

    /// Whether the claim is (or was, with its hold expired) in the dropped state.
    pub fn was_dropped(&self, key: &ClaimKey) -> bool {
        self.dropped_until.contains_key(key)
    }

    /// Ends the dropped state of a claim after a write that stuck.
    pub fn release(&mut self, key: &ClaimKey) {
        self.dropped_until.remove(key);
    }

    /// True only the first time: dropped writes are logged loudly once.
    pub fn first_drop_log(&mut self) -> bool {
        !std::mem::replace(&mut self.dropped_logged, true)
    }

    /// Forgets claims that no longer exist.
    pub fn retain(&mut self, alive: impl Fn(&ClaimKey) -> bool) {
        self.recent.retain(|k, _| alive(k));
        self.dropped_until.retain(|k, _| alive(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ClaimKey {
        ClaimKey {
            namespace: "ns".into(),
            name: "c".into(),
        }
    }
    fn health(reason: &str) -> VolumeHealthStatus {
        VolumeHealthStatus {
            health_conditions: Some(vec![volhealth_model::VolumeHealthCondition {
                status: "Degraded".into(),
                reason: reason.into(),
                message: None,
            }]),
            last_transition_time: None,
        }
    }
    fn stored(rv: &str, h: Option<VolumeHealthStatus>) -> StoredClaim {
        StoredClaim {
            uid: "u".into(),
            resource_version: Some(rv.into()),
            health: h,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn own_write_wins_until_the_cache_catches_up() {
        let mut s = WriteState::default();
        s.record(
            &key(),
            &Patched {
                resource_version: Some("7".into()),
                health: Some(health("A")),
            },
        );
        assert_eq!(s.effective(&key(), &stored("5", None)), Some(health("A")));
        assert_eq!(
            s.effective(&key(), &stored("7", Some(health("A")))),
            Some(health("A"))
        );
        // Someone else changed it later: the cache is the truth again.
        assert_eq!(s.effective(&key(), &stored("9", None)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn own_write_expires() {
        let mut s = WriteState::default();
        s.record(
            &key(),
            &Patched {
                resource_version: Some("x".into()),
                health: Some(health("A")),
            },
        );
        tokio::time::advance(RECENT_WRITE_TTL).await;
        assert_eq!(s.effective(&key(), &stored("w", None)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn hold_expires_and_first_drop_is_reported_once() {
        let mut s = WriteState::default();
        assert!(s.hold(&key(), Instant::now() + Duration::from_secs(10)));
        assert!(!s.hold(&key(), Instant::now() + Duration::from_secs(10)));
        assert!(s.is_held(&key()));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!s.is_held(&key()));
        assert!(s.was_dropped(&key()));
        assert!(s.first_drop_log());
        assert!(!s.first_drop_log());
    }
}
