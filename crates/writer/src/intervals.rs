//! Per-driver probe intervals: an annotation on a driver's CSIDriver object overrides the
//! writer's interval flag for that driver's volumes, and is picked up from a watch without a
//! restart. The monitor reads `volhealth.io/monitor-interval`, the agent
//! `volhealth.io/node-interval`. A value that is not a valid interval is logged once (per
//! driver and value) and ignored: the flag's interval applies.

use k8s_openapi::api::storage::v1::CSIDriver;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;

/// The CSIDriver annotation setting the monitor's interval for the driver's volumes.
pub const MONITOR_ANNOTATION: &str = "volhealth.io/monitor-interval";
/// The CSIDriver annotation setting the node agent's interval for the driver's volumes and
/// backend.
pub const NODE_ANNOTATION: &str = "volhealth.io/node-interval";
/// The shortest interval an annotation may set.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest interval an annotation may set.
pub const MAX_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// Why an annotation's value is not an interval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntervalError {
    /// Not a duration at all.
    #[error("{value:?} is not a duration (write it like 30s, 5m or 1m30s): {why}")]
    NotADuration {
        /// The annotation's value.
        value: String,
        /// What the parser said.
        why: String,
    },
    /// A duration outside the allowed range.
    #[error("{value:?} is outside the allowed range of 1s to 24h")]
    OutOfRange {
        /// The annotation's value.
        value: String,
    },
}

/// Parses an annotation's value: a duration from [`MIN_INTERVAL`] to [`MAX_INTERVAL`].
pub fn parse(value: &str) -> Result<Duration, IntervalError> {
    let d = volhealth_daemon::duration::parse(value.trim()).map_err(|e| {
        let why = match e {
            volhealth_daemon::Error::Duration { reason, .. } => reason,
            other => other.to_string(),
        };
        IntervalError::NotADuration {
            value: value.to_string(),
            why,
        }
    })?;
    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&d) {
        return Err(IntervalError::OutOfRange {
            value: value.to_string(),
        });
    }
    Ok(d)
}

/// The probe interval of each driver: the flag's, unless the driver's CSIDriver says otherwise.
#[derive(Debug)]
pub struct DriverIntervals {
    annotation: &'static str,
    default: Duration,
    /// Driver name → the interval its annotation sets (valid values only).
    overrides: watch::Sender<BTreeMap<String, Duration>>,
    /// (driver, value) pairs already logged as invalid.
    warned: Mutex<BTreeSet<(String, String)>>,
}

impl DriverIntervals {
    /// Intervals read from `annotation`, `default` where a driver sets none.
    pub fn new(annotation: &'static str, default: Duration) -> DriverIntervals {
        DriverIntervals {
            annotation,
            default,
            overrides: watch::Sender::new(BTreeMap::new()),
            warned: Mutex::new(BTreeSet::new()),
        }
    }

    /// The flag's interval.
    pub fn default_interval(&self) -> Duration {
        self.default
    }

    /// The interval of `driver` now.
    pub fn of(&self, driver: &str) -> Duration {
        self.overrides
            .borrow()
            .get(driver)
            .copied()
            .unwrap_or(self.default)
    }

    /// A receiver that sees every change of any driver's interval.
    pub fn subscribe(&self) -> watch::Receiver<BTreeMap<String, Duration>> {
        self.overrides.subscribe()
    }

    /// Takes the interval of the CSIDriver `name` from its `annotations` (as seen now).
    pub fn apply(&self, name: &str, annotations: Option<&BTreeMap<String, String>>) {
        let wanted = match annotations.and_then(|a| a.get(self.annotation)) {
            None => None,
            Some(value) => match parse(value) {
                Ok(d) => Some(d),
                Err(e) => {
                    let first = self
                        .warned
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert((name.to_string(), value.clone()));
                    if first {
                        tracing::warn!(
                            driver = %name,
                            annotation = self.annotation,
                            interval = %volhealth_daemon::duration::format(self.default),
                            "ignoring the CSIDriver's interval annotation: {e}; probing at the flag's interval"
                        );
                    }
                    None
                }
            },
        };
        self.set(name, wanted);
    }

    /// The CSIDriver `name` is gone: its driver gets the flag's interval again.
    pub fn forget(&self, name: &str) {
        self.set(name, None);
    }

    fn set(&self, name: &str, wanted: Option<Duration>) {
        let default = self.default;
        let annotation = self.annotation;
        self.overrides.send_if_modified(|map| {
            let before = map.get(name).copied();
            if before == wanted {
                return false;
            }
            match wanted {
                Some(d) => map.insert(name.to_string(), d),
                None => map.remove(name),
            };
            let now = wanted.unwrap_or(default);
            tracing::info!(
                driver = %name,
                interval = %volhealth_daemon::duration::format(now),
                source = if wanted.is_some() { annotation } else { "the interval flag" },
                "probe interval changed"
            );
            true
        });
    }

    /// Follows CSIDrivers (all of them, or the one named `only`) until the returned guard is
    /// dropped, applying each one's annotation as it changes. A failing watch is retried with
    /// backoff; meanwhile the intervals stay as they were.
    pub fn spawn_watch(
        self: &std::sync::Arc<Self>,
        api: Api<CSIDriver>,
        only: Option<&str>,
    ) -> WatchGuard {
        use futures::StreamExt as _;
        use kube::runtime::WatchStreamExt as _;
        let mut config = watcher::Config::default();
        if let Some(name) = only {
            config = config.fields(&format!("metadata.name={name}"));
        }
        let intervals = self.clone();
        WatchGuard(tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher::watcher(api, config).default_backoff());
            let mut listed: Option<BTreeSet<String>> = None;
            let mut failing = false;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(event) => {
                        failing = false;
                        intervals.on_event(event, &mut listed);
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!(
                                "watching CSIDrivers for interval annotations: {e}; retrying with backoff"
                            );
                            failing = true;
                        }
                    }
                }
            }
        }))
    }

    /// One watch event; `listed` collects the names of a (re)list until it is done.
    fn on_event(&self, event: Event<CSIDriver>, listed: &mut Option<BTreeSet<String>>) {
        let name = |d: &CSIDriver| d.metadata.name.clone().unwrap_or_default();
        match event {
            Event::Init => *listed = Some(BTreeSet::new()),
            Event::InitApply(d) => {
                self.apply(&name(&d), d.metadata.annotations.as_ref());
                if let Some(l) = listed.as_mut() {
                    l.insert(name(&d));
                }
            }
            Event::InitDone => {
                // Drivers deleted while the watch was down.
                let seen = listed.take().unwrap_or_default();
                let gone: Vec<String> = self
                    .overrides
                    .borrow()
                    .keys()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect();
                for g in gone {
                    self.forget(&g);
                }
            }
            Event::Apply(d) => self.apply(&name(&d), d.metadata.annotations.as_ref()),
            Event::Delete(d) => self.forget(&name(&d)),
        }
    }
}

/// Ends the watch of [`DriverIntervals::spawn_watch`] when dropped.
#[derive(Debug)]
pub struct WatchGuard(tokio::task::JoinHandle<()>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(name: &str, value: Option<&str>) -> CSIDriver {
        let mut d = CSIDriver::default();
        d.metadata.name = Some(name.into());
        d.metadata.annotations =
            value.map(|v| BTreeMap::from([(NODE_ANNOTATION.to_string(), v.to_string())]));
        d
    }

    #[test]
    fn values_are_durations_within_bounds() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse(" 1m30s "), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1s"), Ok(MIN_INTERVAL));
        assert_eq!(parse("24h"), Ok(MAX_INTERVAL));
        for bad in ["", "soon", "-5s", "30"] {
            assert!(
                matches!(parse(bad), Err(IntervalError::NotADuration { .. })),
                "{bad:?}: {:?}",
                parse(bad)
            );
        }
        for out in ["500ms", "0s", "25h"] {
            assert!(
                matches!(parse(out), Err(IntervalError::OutOfRange { .. })),
                "{out:?}: {:?}",
                parse(out)
            );
        }
        assert!(parse("soon").unwrap_err().to_string().contains("\"soon\""));
    }

    #[test]
    fn an_annotation_overrides_the_flag_until_it_is_removed_or_invalid() {
        let i = DriverIntervals::new(NODE_ANNOTATION, Duration::from_secs(60));
        let mut rx = i.subscribe();
        assert_eq!(i.of("a.example.com"), Duration::from_secs(60));

        i.apply(
            "a.example.com",
            driver("a", Some("10s")).metadata.annotations.as_ref(),
        );
        assert_eq!(i.of("a.example.com"), Duration::from_secs(10));
        assert_eq!(i.of("b.example.com"), Duration::from_secs(60));
        assert!(rx.has_changed().unwrap());
        rx.mark_unchanged();

        // The same value again is no change.
        i.apply(
            "a.example.com",
            driver("a", Some("10s")).metadata.annotations.as_ref(),
        );
        assert!(!rx.has_changed().unwrap());

        // An invalid value falls back to the flag, it does not keep an old override.
        i.apply(
            "a.example.com",
            driver("a", Some("0s")).metadata.annotations.as_ref(),
        );
        assert_eq!(i.of("a.example.com"), Duration::from_secs(60));

        i.apply(
            "a.example.com",
            driver("a", Some("2m")).metadata.annotations.as_ref(),
        );
        assert_eq!(i.of("a.example.com"), Duration::from_secs(120));
        i.apply("a.example.com", None);
        assert_eq!(i.of("a.example.com"), Duration::from_secs(60));

        // Another writer's annotation is not ours.
        let monitor = DriverIntervals::new(MONITOR_ANNOTATION, Duration::from_secs(60));
        monitor.apply(
            "a.example.com",
            driver("a", Some("10s")).metadata.annotations.as_ref(),
        );
        assert_eq!(monitor.of("a.example.com"), Duration::from_secs(60));
    }

    #[test]
    fn a_relist_forgets_drivers_deleted_while_the_watch_was_down() {
        let i = DriverIntervals::new(NODE_ANNOTATION, Duration::from_secs(60));
        let mut listed = None;
        i.on_event(Event::Apply(driver("a", Some("5s"))), &mut listed);
        i.on_event(Event::Apply(driver("b", Some("7s"))), &mut listed);
        assert_eq!(i.of("a"), Duration::from_secs(5));
        i.on_event(Event::Init, &mut listed);
        i.on_event(Event::InitApply(driver("b", Some("7s"))), &mut listed);
        i.on_event(Event::InitDone, &mut listed);
        assert_eq!(i.of("a"), Duration::from_secs(60), "a was deleted");
        assert_eq!(i.of("b"), Duration::from_secs(7));
        i.on_event(Event::Delete(driver("b", None)), &mut listed);
        assert_eq!(i.of("b"), Duration::from_secs(60));
    }
}
