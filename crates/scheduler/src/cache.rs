//! [`KubeView`]: the [`ClusterView`] over informer caches (watches of CSIDriver, CSINode, PV and
//! PVC), so a filter request reads memory only. Policies are parsed once per CSIDriver change; an
//! invalid one is ignored (its driver is not filtered), reported once per distinct value as a
//! Warning Event on the CSIDriver, and flagged by `volhealth_scheduler_policy_invalid`.

use crate::matching::{ClaimVolume, ClusterView};
use crate::metrics::{DriverLabels, SchedulerMetrics};
use crate::policy::{ANNOTATION, HealthSchedulingPolicy};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use volhealth_kube_access::events::{
    EventSink, EventType, HealthEvent, KubeEventSink, ObjectRef as EventObject,
};
use volhealth_kube_access::watch::spawn_reflector;

/// The Event reason of an invalid policy annotation.
pub const INVALID_POLICY_REASON: &str = "InvalidHealthSchedulingPolicy";

#[derive(Debug, Default)]
struct Policies {
    valid: HashMap<String, Arc<HealthSchedulingPolicy>>,
    /// The last invalid annotation value reported per driver.
    reported: HashMap<String, String>,
}

/// Informer caches of what the filter reads.
#[derive(Clone)]
pub struct KubeView {
    pvs: Store<PersistentVolume>,
    pvcs: Store<PersistentVolumeClaim>,
    csinodes: Store<CSINode>,
    policies: Arc<RwLock<Policies>>,
    drivers_synced: Arc<AtomicBool>,
    synced: Arc<AtomicBool>,
}

impl KubeView {
    /// Starts the four watches (they run until the runtime stops).
    pub fn start(client: Client, metrics: Arc<SchedulerMetrics>) -> KubeView {
        let view = KubeView {
            pvs: spawn_reflector(Api::all(client.clone()), "persistentvolumes"),
            pvcs: spawn_reflector(Api::all(client.clone()), "persistentvolumeclaims"),
            csinodes: spawn_reflector(Api::all(client.clone()), "csinodes"),
            policies: Arc::default(),
            drivers_synced: Arc::default(),
            synced: Arc::default(),
        };
        let sink = KubeEventSink::new(
            client.clone(),
            "volhealth-scheduler-extender",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "volhealth-scheduler-extender".into()),
            None,
        );
        tokio::spawn(view.clone().watch_drivers(Api::all(client), sink, metrics));
        let v = view.clone();
        tokio::spawn(async move {
            let ok = v.pvs.wait_until_ready().await.is_ok()
                && v.pvcs.wait_until_ready().await.is_ok()
                && v.csinodes.wait_until_ready().await.is_ok();
            while ok && !v.drivers_synced.load(Ordering::Acquire) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            v.synced.store(ok, Ordering::Release);
        });
        view
    }

    async fn watch_drivers(
        self,
        api: Api<CSIDriver>,
        sink: KubeEventSink,
        metrics: Arc<SchedulerMetrics>,
    ) {
        let mut stream = Box::pin(watcher(api, watcher::Config::default()).default_backoff());
        let mut relisted: Option<HashSet<String>> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => relisted = Some(HashSet::new()),
                Ok(watcher::Event::InitApply(d)) => {
                    if let Some(seen) = relisted.as_mut() {
                        seen.insert(d.metadata.name.clone().unwrap_or_default());
                    }
                    self.observe(&d, &sink, &metrics);
                }
                Ok(watcher::Event::InitDone) => {
                    let seen = relisted.take().unwrap_or_default();
                    let gone: Vec<String> = {
                        let p = self.policies.read().unwrap_or_else(|e| e.into_inner());
                        p.valid
                            .keys()
                            .chain(p.reported.keys())
                            .filter(|n| !seen.contains(*n))
                            .cloned()
                            .collect()
                    };
                    for name in gone {
                        self.forget(&name, &metrics);
                    }
                    self.drivers_synced.store(true, Ordering::Release);
                }
                Ok(watcher::Event::Apply(d)) => self.observe(&d, &sink, &metrics),
                Ok(watcher::Event::Delete(d)) => {
                    self.forget(d.metadata.name.as_deref().unwrap_or_default(), &metrics)
                }
                Err(e) => {
                    tracing::warn!(resource = "csidrivers", error = %e, "watch failed; retrying with backoff")
                }
            }
        }
    }

    fn forget(&self, name: &str, metrics: &SchedulerMetrics) {
        let mut p = self.policies.write().unwrap_or_else(|e| e.into_inner());
        p.valid.remove(name);
        p.reported.remove(name);
        metrics.policy_invalid.remove(&DriverLabels {
            driver_name: name.to_string(),
        });
    }

    fn observe(&self, driver: &CSIDriver, sink: &KubeEventSink, metrics: &SchedulerMetrics) {
        let name = driver.metadata.name.clone().unwrap_or_default();
        let text = driver
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION));
        let labels = DriverLabels {
            driver_name: name.clone(),
        };
        let mut p = self.policies.write().unwrap_or_else(|e| e.into_inner());
        let Some(text) = text else {
            p.valid.remove(&name);
            p.reported.remove(&name);
            metrics.policy_invalid.remove(&labels);
            return;
        };
        match HealthSchedulingPolicy::parse(text) {
            Ok(policy) => {
                tracing::info!(driver = %name, rules = policy.rules.len(), "health scheduling policy in effect");
                p.valid.insert(name.clone(), Arc::new(policy));
                p.reported.remove(&name);
                metrics.policy_invalid.get_or_create(&labels).set(0);
            }
            Err(err) => {
                p.valid.remove(&name);
                metrics.policy_invalid.get_or_create(&labels).set(1);
                if p.reported.get(&name) == Some(text) {
                    return;
                }
                p.reported.insert(name.clone(), text.clone());
                tracing::warn!(driver = %name, error = %err, "ignoring an invalid health scheduling policy; this driver's pods are not filtered");
                let event = HealthEvent {
                    object: EventObject {
                        api_version: "storage.k8s.io/v1",
                        kind: "CSIDriver",
                        namespace: None,
                        name: name.clone(),
                        uid: driver.metadata.uid.clone(),
                    },
                    event_type: EventType::Warning,
                    reason: INVALID_POLICY_REASON,
                    message: format!(
                        "{err}; the policy is ignored, so no node is filtered for this driver"
                    ),
                };
                let sink = sink.clone();
                tokio::spawn(async move {
                    if let Err(e) = sink.create(&event, 1).await {
                        tracing::warn!(driver = %event.object.name, error = %e, "could not create the invalid-policy Event");
                    }
                });
            }
        }
    }
}

impl ClusterView for KubeView {
    fn policy(&self, driver: &str) -> Option<Arc<HealthSchedulingPolicy>> {
        let p = self.policies.read().unwrap_or_else(|e| e.into_inner());
        p.valid.get(driver).cloned()
    }

    fn claim_volume(&self, namespace: &str, name: &str) -> Option<ClaimVolume> {
        let pvc = self
            .pvcs
            .get(&ObjectRef::<PersistentVolumeClaim>::new(name).within(namespace))?;
        let pv_name = pvc.spec.as_ref()?.volume_name.as_deref()?;
        let pv = self.pvs.get(&ObjectRef::<PersistentVolume>::new(pv_name))?;
        let spec = pv.spec.as_ref()?;
        Some(ClaimVolume {
            claim: format!("{namespace}/{name}"),
            driver: spec.csi.as_ref()?.driver.clone(),
            access_modes: spec.access_modes.clone().unwrap_or_default(),
            volume_mode: spec
                .volume_mode
                .clone()
                .unwrap_or_else(|| "Filesystem".into()),
        })
    }

    fn csinode(&self, node: &str) -> Option<Arc<CSINode>> {
        self.csinodes.get(&ObjectRef::new(node))
    }

    fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
}
