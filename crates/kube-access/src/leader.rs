//! Leader election on a Lease, so that of several replicas only one writes or acts, for every
//! component that elects (the monitor, the remediation controller).
//!
//! kube-lease-manager acquires and renews the Lease. On top of it this module checks, every retry
//! period, that the Lease really names this replica with an unexpired renewal: if renewals stop
//! getting through (API server unreachable, clock trouble), leadership ends locally before
//! another replica can take the Lease over, instead of whenever the manager notices. The
//! timings are checked at start as client-go checks them.
//!
//! Two views of the outcome: [`Election::leader`], a flag that changes at most every retry
//! period (for loops that start and stop on it), and [`Leadership::is_fresh`], which answers at
//! the moment it is asked whether the last confirmation is younger than the renew deadline. A
//! component that acts on the cluster (the remediation controller evicts pods) asks the latter
//! before each action, so it stops the moment the Lease is not fresh, not up to a retry period
//! later.

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;
pub use kube_lease_manager::LeaseManagerError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Default lease duration.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default renew deadline.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default retry period.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(5);

/// Leader-election timings (the client-go names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// Namespace of the Lease; `None` = the in-cluster namespace, else `default`.
    pub namespace: Option<String>,
    /// How long a holder's claim is valid after its last renewal.
    pub lease_duration: Duration,
    /// How long before expiry the holder must have renewed.
    pub renew_deadline: Duration,
    /// How often a candidate retries.
    pub retry_period: Duration,
    /// The holder identity; `None` = host name plus a random suffix.
    pub identity: Option<String>,
    /// Labels put on the Lease once this replica holds it (`--leader-election-labels`).
    pub labels: std::collections::BTreeMap<String, String>,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            namespace: None,
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            identity: None,
            labels: Default::default(),
        }
    }
}

/// client-go's `JitterFactor`: a renew deadline must exceed the retry period by this factor, so
/// a leader tries to renew more than once before its deadline passes.
pub const LEADER_ELECTION_JITTER: f64 = 1.2;

impl LeaderElection {
    /// The rules client-go's leader election refuses to start without, each message naming the
    /// flag that is wrong: every period at least a second (the Lease counts whole seconds), the
    /// lease longer than the renew deadline, the renew deadline longer than 1.2 retry periods.
    pub fn validate(&self) -> Result<(), TimingError> {
        for (flag, d) in [
            ("--leader-election-lease-duration", self.lease_duration),
            ("--leader-election-renew-deadline", self.renew_deadline),
            ("--leader-election-retry-period", self.retry_period),
        ] {
            if d < Duration::from_secs(1) {
                return Err(TimingError::TooShort { flag, got: d });
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(TimingError::LeaseNotLonger {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        if self.renew_deadline.as_secs_f64()
            <= LEADER_ELECTION_JITTER * self.retry_period.as_secs_f64()
        {
            return Err(TimingError::NoRetryBeforeDeadline {
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        Ok(())
    }
}

fn show(d: &Duration) -> String {
    volhealth_daemon::duration::format(*d)
}

/// Leader-election timings client-go refuses, each naming its flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// A period under one second.
    #[error("{flag} must be at least 1s, got {}", show(got))]
    TooShort {
        /// The flag.
        flag: &'static str,
        /// Its value.
        got: Duration,
    },
    /// The lease is not longer than the renew deadline.
    #[error(
        "--leader-election-lease-duration ({}) must be greater than --leader-election-renew-deadline ({})",
        show(lease),
        show(renew)
    )]
    LeaseNotLonger {
        /// The lease duration.
        lease: Duration,
        /// The renew deadline.
        renew: Duration,
    },
    /// The renew deadline leaves no second try before it passes.
    #[error(
        "--leader-election-renew-deadline ({}) must be greater than {LEADER_ELECTION_JITTER} x --leader-election-retry-period ({}), so the leader retries before its deadline",
        show(renew),
        show(retry)
    )]
    NoRetryBeforeDeadline {
        /// The renew deadline.
        renew: Duration,
        /// The retry period.
        retry: Duration,
    },
}

/// Whether this replica may act right now: it holds the Lease and the last confirmation of that
/// is younger than the renew deadline. Cheap to clone; holding one does not keep the election
/// running.
#[derive(Debug, Clone)]
pub struct Leadership {
    /// `None`: no election (a single replica), always leading.
    fresh: Option<Arc<Freshness>>,
}

#[derive(Debug)]
struct Freshness {
    renew_deadline: Duration,
    /// When the Lease was last confirmed to be this replica's; `None` while it is not.
    confirmed: Mutex<Option<Instant>>,
}

impl Leadership {
    /// Leadership without an election: always fresh.
    pub fn unelected() -> Leadership {
        Leadership { fresh: None }
    }

    /// Leadership confirmed by [`Leadership::confirm`], expiring `renew_deadline` after each
    /// confirmation; for the election loop and for tests.
    pub fn with_renew_deadline(renew_deadline: Duration) -> Leadership {
        Leadership {
            fresh: Some(Arc::new(Freshness {
                renew_deadline,
                confirmed: Mutex::new(None),
            })),
        }
    }

    /// Records that the Lease was just confirmed to be this replica's (`true`), or that it is not
    /// (`false`: leadership ends at once).
    pub fn confirm(&self, holds: bool) {
        if let Some(f) = &self.fresh {
            *f.confirmed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = holds.then(Instant::now);
        }
    }

    /// Whether this replica may act now: the last confirmation is younger than the renew
    /// deadline (always true without an election).
    pub fn is_fresh(&self) -> bool {
        let Some(f) = &self.fresh else {
            return true;
        };
        f.confirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|t| t.elapsed() < f.renew_deadline)
    }
}

/// A running election.
pub struct Election {
    /// True while this replica may write; changes at most every retry period.
    pub leader: watch::Receiver<bool>,
    /// Whether this replica may act at the moment it is asked (see [`Leadership`]).
    pub leadership: Leadership,
    /// False once the election machinery itself has failed (for `/healthz`).
    pub healthy: Arc<AtomicBool>,
    /// Ends once the election has stopped: after every `leader` receiver is dropped, the Lease is
    /// released (so a successor need not wait for it to expire) and this completes.
    pub done: tokio::task::JoinHandle<()>,
}

impl Election {
    /// Stops electing and releases the Lease, so a successor need not wait for it to expire;
    /// waits at most five seconds for that.
    pub async fn release(self) {
        drop(self.leader);
        if tokio::time::timeout(Duration::from_secs(5), self.done)
            .await
            .is_err()
        {
            tracing::warn!("the leader Lease was not released in time; it will expire");
        }
    }
}

/// A default holder identity: host name (else `fallback_host`) plus a per-process suffix.
pub fn default_identity(fallback_host: &str) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| fallback_host.to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{host}_{:x}{:08x}", std::process::id(), nanos)
}

/// Whether `lease` names `identity` as holder with a renewal younger than its duration and than
/// `max_age` (the renew deadline: stopping then leaves a margin before anyone else may take over).
fn holds(
    lease: &Lease,
    identity: &str,
    now: jiff::Timestamp,
    max_age: std::time::Duration,
) -> bool {
    let Some(spec) = lease.spec.as_ref() else {
        return false;
    };
    if spec.holder_identity.as_deref() != Some(identity) {
        return false;
    }
    let (Some(renew), Some(secs)) = (spec.renew_time.as_ref(), spec.lease_duration_seconds) else {
        return false;
    };
    let Ok(valid) = renew.0.checked_add(jiff::SignedDuration::from_secs(
        i64::from(secs).min(i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX)),
    )) else {
        return false;
    };
    valid > now
}

/// Puts `labels` (`--leader-election-labels`) on the Lease this replica now holds. The Lease
/// manager creates the Lease without labels, so the holder adds them; a failure is logged and
/// costs nothing else (the labels are for people and tools, not for the election).
async fn label(api: &Api<Lease>, name: &str, labels: &std::collections::BTreeMap<String, String>) {
    if labels.is_empty() {
        return;
    }
    let patch = kube::api::Patch::Merge(serde_json::json!({ "metadata": { "labels": labels } }));
    if let Err(e) = api
        .patch(name, &kube::api::PatchParams::default(), &patch)
        .await
    {
        tracing::warn!(lease = %name, error = %e, "could not label the leader Lease");
    }
}

/// Starts electing on Lease `name` in `namespace` as `identity`.
pub async fn start(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
    le: &LeaderElection,
) -> Result<Election, LeaseManagerError> {
    let duration = le.lease_duration.as_secs().max(2);
    // The holder renews every (duration - grace); with grace = renew deadline that is the retry period.
    let grace = le.renew_deadline.as_secs().clamp(1, duration - 1);
    let manager = LeaseManagerBuilder::new(client.clone(), name)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(duration)
        .with_grace(grace)
        .build()
        .await?;
    let (mut managed, task) = manager.watch().await;
    let (tx, rx) = watch::channel(false);
    let healthy = Arc::new(AtomicBool::new(true));
    let h = healthy.clone();
    let done = tokio::spawn(async move {
        let _ = task.await;
        h.store(false, Ordering::Release);
    });
    let api = Api::<Lease>::namespaced(client, namespace);
    let (name, identity, retry) = (name.to_string(), identity.to_string(), le.retry_period);
    let renew_deadline = le.renew_deadline;
    let labels = le.labels.clone();
    let leadership = Leadership::with_renew_deadline(renew_deadline);
    let fresh = leadership.clone();
    tokio::spawn(async move {
        loop {
            let manager_says = *managed.borrow_and_update();
            if manager_says {
                match api.get(&name).await {
                    Ok(lease) => fresh.confirm(holds(
                        &lease,
                        &identity,
                        jiff::Timestamp::now(),
                        renew_deadline,
                    )),
                    // Not confirmed: the last confirmation ages towards the renew deadline.
                    Err(e) => tracing::warn!(error = %e, "could not read the leader Lease"),
                }
            } else {
                fresh.confirm(false);
            }
            let lead = manager_says && fresh.is_fresh();
            let was = *tx.borrow();
            if lead != was {
                if lead {
                    tracing::info!(lease = %name, %identity, "acquired the leader Lease");
                    label(&api, &name, &labels).await;
                } else {
                    tracing::warn!(lease = %name, %identity, "not (or no longer) the leader; not writing");
                }
                tx.send_replace(lead);
            }
            tokio::select! {
                _ = tx.closed() => { fresh.confirm(false); return },
                r = managed.changed() => if r.is_err() {
                    fresh.confirm(false);
                    tx.send_replace(false);
                    return;
                },
                _ = tokio::time::sleep(retry) => {}
            }
        }
    });
    Ok(Election {
        done,
        leader: rx,
        leadership,
        healthy,
    })
}

/// The Lease namespace: the configured one, else the client's default (in-cluster: the pod's).
pub fn namespace(le: &LeaderElection, client_default: &str) -> String {
    le.namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            if client_default.is_empty() {
                "default".to_string()
            } else {
                client_default.to_string()
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: &str, renewed: jiff::Timestamp) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(15),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn holds_only_an_own_unexpired_lease() {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let recent = jiff::Timestamp::from_second(999_990).unwrap();
        let old = jiff::Timestamp::from_second(999_980).unwrap();
        let deadline = std::time::Duration::from_secs(12);
        assert!(holds(&lease("me", recent), "me", now, deadline));
        assert!(!holds(&lease("other", recent), "me", now, deadline));
        assert!(
            !holds(&lease("me", old), "me", now, deadline),
            "older than the lease duration"
        );
        let earlier = jiff::Timestamp::from_second(999_989).unwrap();
        assert!(holds(&lease("me", earlier), "me", now, deadline));
        assert!(
            !holds(
                &lease("me", earlier),
                "me",
                now,
                std::time::Duration::from_secs(10)
            ),
            "older than the renew deadline"
        );
        assert!(!holds(&Lease::default(), "me", now, deadline));
    }

    #[tokio::test(start_paused = true)]
    async fn leadership_is_fresh_only_within_the_renew_deadline_of_a_confirmation() {
        let l = Leadership::with_renew_deadline(Duration::from_secs(10));
        assert!(!l.is_fresh(), "never confirmed");
        l.confirm(true);
        let seen_by_the_actor = l.clone();
        assert!(seen_by_the_actor.is_fresh());
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(seen_by_the_actor.is_fresh());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(
            !seen_by_the_actor.is_fresh(),
            "stale at the renew deadline, without waiting for the election loop"
        );
        l.confirm(true);
        assert!(seen_by_the_actor.is_fresh());
        l.confirm(false);
        assert!(!seen_by_the_actor.is_fresh(), "another holder: at once");
        assert!(Leadership::unelected().is_fresh());
    }

    #[test]
    fn namespace_defaults() {
        let le = LeaderElection::default();
        assert_eq!(namespace(&le, "kube-system"), "kube-system");
        assert_eq!(namespace(&le, ""), "default");
        let le = LeaderElection {
            namespace: Some("x".into()),
            ..Default::default()
        };
        assert_eq!(namespace(&le, "kube-system"), "x");
    }

    #[test]
    fn leader_election_timings_are_checked_as_client_go_does() {
        let le = |lease: u64, renew: u64, retry: u64| LeaderElection {
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
            ..LeaderElection::default()
        };
        assert_eq!(LeaderElection::default().validate(), Ok(()));
        assert_eq!(le(4, 3, 1).validate(), Ok(()));
        let err = |l: LeaderElection| l.validate().unwrap_err().to_string();
        // The leader would re-read less often than its deadline.
        assert!(
            err(le(5, 3, 4)).starts_with("--leader-election-renew-deadline (3s) must be greater than 1.2 x --leader-election-retry-period (4s)"),
            "{}",
            err(le(5, 3, 4))
        );
        // A 0 s lease names the lease, not the renew deadline.
        assert!(
            err(le(0, 10, 2)).starts_with("--leader-election-lease-duration must be at least 1s"),
            "{}",
            err(le(0, 10, 2))
        );
        assert!(err(le(10, 10, 2)).starts_with("--leader-election-lease-duration (10s) must be greater than --leader-election-renew-deadline (10s)"));
        assert!(
            err(le(15, 10, 0)).starts_with("--leader-election-retry-period must be at least 1s")
        );
        // 1.2 x 5 s is 6 s: a 6 s deadline is not enough, as in client-go.
        assert!(le(15, 6, 5).validate().is_err());
        assert_eq!(le(15, 7, 5).validate(), Ok(()));
    }
}
