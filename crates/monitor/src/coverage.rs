//! What watches the driver's volumes on the controller side, published on the driver's
//! CSIDriver for `volhealth status` (annotations [`coverage::CONTROLLER_SOURCE`] and
//! [`coverage::CONTROLLER_MODE`]). Written at start and when the driver's capabilities change,
//! and only when the object holds something else: a restarted monitor reads, finds its value and
//! writes nothing. Without a CSIDriver object (or the right to read or patch it) the monitor says
//! so once and carries on; `status` then shows the controller side as unknown.

use crate::engine::{DriverInfo, Mode};
use async_trait::async_trait;
use k8s_openapi::api::storage::v1::CSIDriver;
use kube::api::{Api, Patch, PatchParams};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use volhealth_backoff::Backoff;
use volhealth_writer::ApiFailure;
use volhealth_writer::coverage::{self, Source};

/// What the monitor publishes for its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerCoverage {
    /// What answers; `None` = nothing.
    pub source: Option<Source>,
    /// How it is asked: `list`, `get`, `annotation` or `off`.
    pub mode: &'static str,
}

impl ControllerCoverage {
    /// The coverage a capability probe's result gives.
    pub fn of(info: &DriverInfo) -> ControllerCoverage {
        let rpc = if info.legacy {
            Source::LegacyVolumeCondition
        } else {
            Source::HealthRpcs
        };
        let (source, mode) = match info.mode {
            Mode::List { .. } => (Some(rpc), "list"),
            Mode::Get => (Some(rpc), "get"),
            Mode::Annotation => (Some(Source::Annotation), "annotation"),
            Mode::Off => (None, "off"),
        };
        ControllerCoverage { source, mode }
    }

    fn annotations(self) -> [(&'static str, &'static str); 2] {
        [
            (
                coverage::CONTROLLER_SOURCE,
                coverage::controller_value(self.source),
            ),
            (coverage::CONTROLLER_MODE, self.mode),
        ]
    }
}

/// The boundary to the driver's CSIDriver object.
#[async_trait]
pub trait DriverObject: Send + Sync {
    /// Its annotations; `Ok(None)` when there is no such object.
    async fn annotations(
        &self,
        driver: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ApiFailure>;
    /// Applies a merge patch of its metadata.
    async fn patch(&self, driver: &str, patch: serde_json::Value) -> Result<(), ApiFailure>;
}

/// [`DriverObject`] over a kube client.
#[derive(Clone)]
pub struct KubeDriverObject(pub kube::Client);

#[async_trait]
impl DriverObject for KubeDriverObject {
    async fn annotations(
        &self,
        driver: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ApiFailure> {
        let found = Api::<CSIDriver>::all(self.0.clone())
            .get_opt(driver)
            .await?;
        Ok(found.map(|d| d.metadata.annotations.unwrap_or_default()))
    }

    async fn patch(&self, driver: &str, patch: serde_json::Value) -> Result<(), ApiFailure> {
        Api::<CSIDriver>::all(self.0.clone())
            .patch(driver, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }
}

/// What one publish attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// The value was already there (or was already published by this monitor): nothing written.
    Unchanged,
    /// The annotations were patched.
    Written,
    /// There is nothing to write to, or no right to: said once, not retried until the value
    /// changes.
    GaveUp,
    /// The API failed; worth another try.
    Failed(String),
}

/// Publishes the controller coverage of one driver, writing only changes.
pub struct Publisher {
    api: Arc<dyn DriverObject>,
    driver: String,
    /// The value the object is known to hold (or that cannot be written), so the same value is
    /// not even read again.
    settled: Option<ControllerCoverage>,
    /// Whether the missing or forbidden object was already reported.
    reported: bool,
}

impl Publisher {
    /// A publisher for `driver`'s CSIDriver.
    pub fn new(api: Arc<dyn DriverObject>, driver: &str) -> Self {
        Publisher {
            api,
            driver: driver.to_string(),
            settled: None,
            reported: false,
        }
    }

    /// Makes the CSIDriver say `wanted`, when it does not yet.
    pub async fn publish(&mut self, wanted: ControllerCoverage) -> Published {
        if self.settled == Some(wanted) {
            return Published::Unchanged;
        }
        let driver = self.driver.clone();
        let current = match self.api.annotations(&driver).await {
            Ok(Some(a)) => a,
            Ok(None) => return self.give_up(wanted, "there is no CSIDriver object of that name"),
            Err(e) if e.is_forbidden() => {
                return self.give_up(wanted, &format!("reading the CSIDriver was refused: {e}"));
            }
            Err(e) => return Published::Failed(format!("reading CSIDriver {driver}: {e}")),
        };
        let Some(patch) = coverage::annotation_patch(Some(&current), &wanted.annotations()) else {
            self.settled = Some(wanted);
            return Published::Unchanged;
        };
        match self.api.patch(&driver, patch).await {
            Ok(()) => {
                self.settled = Some(wanted);
                tracing::info!(driver = %driver, source = coverage::controller_value(wanted.source), mode = wanted.mode, "published the controller health source on the CSIDriver");
                Published::Written
            }
            Err(e) if e.is_forbidden() || e.is_not_found() => {
                self.give_up(wanted, &format!("patching the CSIDriver failed: {e}"))
            }
            Err(e) => Published::Failed(format!("patching CSIDriver {driver}: {e}")),
        }
    }

    fn give_up(&mut self, wanted: ControllerCoverage, why: &str) -> Published {
        self.settled = Some(wanted);
        if !self.reported {
            self.reported = true;
            tracing::warn!(driver = %self.driver, "not publishing which source watches the driver's volumes ({why}); `volhealth status` shows the controller side as unknown");
        }
        Published::GaveUp
    }
}

/// Longest wait between attempts after an API failure.
const MAX_RETRY: Duration = Duration::from_secs(60);

/// Publishes the coverage of every probe result `probed` carries, retrying failures with
/// backoff, until `probed`'s sender is gone or `stop` turns true.
pub async fn run(
    mut publisher: Publisher,
    mut probed: watch::Receiver<DriverInfo>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Backoff::new(Duration::from_secs(1), MAX_RETRY);
    loop {
        let value = ControllerCoverage::of(&probed.borrow_and_update());
        match publisher.publish(value).await {
            Published::Failed(e) => {
                let wait = backoff.next_delay();
                tracing::warn!(error = %e, retry_in = ?wait, "publishing the controller health source failed");
                tokio::select! {
                    _ = stop.wait_for(|v| *v) => return,
                    r = probed.changed() => if r.is_err() { return },
                    _ = tokio::time::sleep(wait) => {}
                }
                continue;
            }
            _ => backoff.reset(),
        }
        tokio::select! {
            _ = stop.wait_for(|v| *v) => return,
            r = probed.changed() => if r.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A CSIDriver in memory (or none), counting reads and writes.
    #[derive(Clone, Default)]
    struct FakeDriver {
        object: Arc<Mutex<Option<BTreeMap<String, String>>>>,
        refuse: Arc<Mutex<Option<u16>>>,
        reads: Arc<Mutex<usize>>,
        writes: Arc<Mutex<Vec<serde_json::Value>>>,
    }

    impl FakeDriver {
        fn existing() -> Self {
            let f = FakeDriver::default();
            let mut a = BTreeMap::new();
            a.insert("someone.else/keeps".to_string(), "this".to_string());
            *f.object.lock().unwrap() = Some(a);
            f
        }
        fn refusal(&self) -> Option<ApiFailure> {
            let code = (*self.refuse.lock().unwrap())?;
            Some(ApiFailure {
                code: Some(code),
                message: "no".into(),
            })
        }
    }

    #[async_trait::async_trait]
    impl DriverObject for FakeDriver {
        async fn annotations(
            &self,
            _: &str,
        ) -> Result<Option<BTreeMap<String, String>>, ApiFailure> {
            *self.reads.lock().unwrap() += 1;
            if let Some(e) = self.refusal() {
                return Err(e);
            }
            Ok(self.object.lock().unwrap().clone())
        }
        async fn patch(&self, _: &str, patch: serde_json::Value) -> Result<(), ApiFailure> {
            if let Some(e) = self.refusal() {
                return Err(e);
            }
            let mut obj = self.object.lock().unwrap();
            let Some(a) = obj.as_mut() else {
                return Err(ApiFailure {
                    code: Some(404),
                    message: "gone".into(),
                });
            };
            for (k, v) in patch["metadata"]["annotations"].as_object().unwrap() {
                a.insert(k.clone(), v.as_str().unwrap().to_string());
            }
            self.writes.lock().unwrap().push(patch);
            Ok(())
        }
    }

    fn info(mode: Mode, legacy: bool) -> DriverInfo {
        DriverInfo {
            driver_name: "d.example".into(),
            mode,
            violations: vec![],
            legacy,
        }
    }

    #[test]
    fn each_mode_names_its_source() {
        let c = |m, l| ControllerCoverage::of(&info(m, l));
        assert_eq!(
            c(Mode::List { get: true }, false),
            ControllerCoverage {
                source: Some(Source::HealthRpcs),
                mode: "list"
            }
        );
        assert_eq!(
            c(Mode::Get, true),
            ControllerCoverage {
                source: Some(Source::LegacyVolumeCondition),
                mode: "get"
            }
        );
        assert_eq!(c(Mode::Annotation, false).source, Some(Source::Annotation));
        assert_eq!(
            c(Mode::Off, false),
            ControllerCoverage {
                source: None,
                mode: "off"
            }
        );
    }

    #[tokio::test]
    async fn writes_once_per_change_and_keeps_other_annotations() {
        let fake = FakeDriver::existing();
        let mut p = Publisher::new(Arc::new(fake.clone()), "d.example");
        let rpc = ControllerCoverage::of(&info(Mode::List { get: true }, false));
        assert_eq!(p.publish(rpc).await, Published::Written);
        assert_eq!(p.publish(rpc).await, Published::Unchanged);
        assert_eq!(
            *fake.reads.lock().unwrap(),
            1,
            "a settled value is not read again"
        );
        assert_eq!(fake.writes.lock().unwrap().len(), 1);
        let held = fake.object.lock().unwrap().clone().unwrap();
        assert_eq!(held[coverage::CONTROLLER_SOURCE], "health-rpcs");
        assert_eq!(held[coverage::CONTROLLER_MODE], "list");
        assert_eq!(held["someone.else/keeps"], "this");

        // The driver loses its health RPCs: one more write, of the changed value.
        let off = ControllerCoverage::of(&info(Mode::Off, false));
        assert_eq!(p.publish(off).await, Published::Written);
        assert_eq!(fake.writes.lock().unwrap().len(), 2);
        assert_eq!(
            fake.object.lock().unwrap().clone().unwrap()[coverage::CONTROLLER_SOURCE],
            "none"
        );
    }

    #[tokio::test]
    async fn a_restarted_monitor_reads_its_value_and_writes_nothing() {
        let fake = FakeDriver::existing();
        let rpc = ControllerCoverage::of(&info(Mode::Get, false));
        Publisher::new(Arc::new(fake.clone()), "d.example")
            .publish(rpc)
            .await;
        let mut again = Publisher::new(Arc::new(fake.clone()), "d.example");
        assert_eq!(again.publish(rpc).await, Published::Unchanged);
        assert_eq!(fake.writes.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn without_the_object_or_the_right_it_gives_up_until_the_value_changes() {
        let fake = FakeDriver::default();
        let mut p = Publisher::new(Arc::new(fake.clone()), "d.example");
        let rpc = ControllerCoverage::of(&info(Mode::Get, false));
        assert_eq!(p.publish(rpc).await, Published::GaveUp);
        assert_eq!(p.publish(rpc).await, Published::Unchanged);
        assert_eq!(*fake.reads.lock().unwrap(), 1);

        let fake = FakeDriver::existing();
        *fake.refuse.lock().unwrap() = Some(403);
        let mut p = Publisher::new(Arc::new(fake.clone()), "d.example");
        assert_eq!(p.publish(rpc).await, Published::GaveUp);
        assert!(fake.writes.lock().unwrap().is_empty());

        *fake.refuse.lock().unwrap() = Some(503);
        let mut p = Publisher::new(Arc::new(fake.clone()), "d.example");
        assert!(matches!(p.publish(rpc).await, Published::Failed(_)));
        *fake.refuse.lock().unwrap() = None;
        assert_eq!(
            p.publish(rpc).await,
            Published::Written,
            "a failure is tried again"
        );
    }
}
