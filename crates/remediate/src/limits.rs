//! Per-action rate limits: at most `max` actions of one kind per window, as the policy's
//! `rateLimits` says. An action over its limit waits for a later tick.

use crate::policy::Policy;
use jiff::Timestamp;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// The sliding-window counters of every limited action.
#[derive(Debug, Default)]
pub struct RateLimits {
    limits: HashMap<String, (u32, Duration)>,
    taken: HashMap<String, VecDeque<Timestamp>>,
}

impl RateLimits {
    /// The limits `policy` sets.
    pub fn new(policy: &Policy) -> RateLimits {
        let limits = policy
            .rate_limits
            .keys()
            .filter_map(|a| Some((a.clone(), policy.rate_limit(a)?)))
            .collect();
        RateLimits {
            limits,
            taken: HashMap::new(),
        }
    }

    /// Whether one more `action` fits at `now`; if it does, it is counted.
    pub fn take(&mut self, action: &str, now: Timestamp) -> bool {
        let Some((max, window)) = self.limits.get(action).copied() else {
            return true;
        };
        let recent = self.taken.entry(action.to_string()).or_default();
        forget_before(recent, now, window);
        if recent.len() < max as usize {
            recent.push_back(now);
            true
        } else {
            false
        }
    }
}

/// Drops from the front of `recent` (oldest first) the times `window` or more before `now`.
pub fn forget_before(recent: &mut VecDeque<Timestamp>, now: Timestamp, window: Duration) {
    while let Some(first) = recent.front() {
        let age: Option<Duration> = now.duration_since(*first).try_into().ok();
        if age.is_some_and(|a| a >= window) {
            recent.pop_front();
        } else {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limited_action_waits_for_its_window_and_others_are_free() {
        let policy = Policy::parse(
            "rateLimits: {evict: {max: 2, per: 1m}}\nrules:\n- name: r\n  match: {object: Pod, status: Inaccessible}\n  actions: [evict]\n",
        )
        .unwrap();
        let mut l = RateLimits::new(&policy);
        let t = |s: &str| -> Timestamp { s.parse().unwrap() };
        assert!(l.take("evict", t("2026-01-01T00:00:00Z")));
        assert!(l.take("evict", t("2026-01-01T00:00:10Z")));
        assert!(!l.take("evict", t("2026-01-01T00:00:59Z")));
        assert!(
            l.take("evict", t("2026-01-01T00:01:00Z")),
            "the first left the window"
        );
        for _ in 0..100 {
            assert!(l.take("annotate", t("2026-01-01T00:00:00Z")));
        }
    }

    #[test]
    fn rate_limits_name_actions_and_have_a_window() {
        let err = Policy::parse(
            "rateLimits: {reboot: {max: 1, per: 1m}, evict: {max: 0, per: 0s}}\nrules:\n- name: r\n  match: {object: Pod, status: Inaccessible}\n  actions: [evict]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("rateLimits.reboot: not an action"), "{err}");
        assert!(
            err.contains("rateLimits.evict.max must be at least 1"),
            "{err}"
        );
        assert!(
            err.contains("rateLimits.evict.per must be longer than 0"),
            "{err}"
        );
    }
}
