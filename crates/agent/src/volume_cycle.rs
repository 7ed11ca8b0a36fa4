//! Per-pod volume health: probe each attempted CSI volume with NodeGetVolumeHealth and write pod.status.volumeHealth.

use crate::agent::{Agent, Resolution};
use crate::drivers::Driver;
use crate::error::Result;
use crate::kubelet_dirs::MountAttempt;
use crate::metrics::METHOD_VOLUME;
use crate::pod_volumes::{self, CsiVolume, VolumeRef};
use crate::targets::PodKey;
use crate::watched::WatchedPod;
use std::collections::BTreeMap;
use std::sync::Arc;
use volhealth_csi::v1;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_writer::pacing::Pacer;
use volhealth_writer::{EntryReports, ObjectRef, ProbeError, timed};

/// One volume to probe.
struct Target {
    volume: CsiVolume,
    driver: Arc<Driver>,
    attempt: MountAttempt,
}

impl Agent {
    pub(crate) async fn volume_cycle(
        &self,
        pods: Vec<Arc<WatchedPod>>,
        drivers: &BTreeMap<String, Arc<Driver>>,
        start: tokio::time::Instant,
        spread: std::time::Duration,
    ) -> Result<()> {
        let mut work: Vec<(Arc<WatchedPod>, Vec<Target>)> = Vec::new();
        for pod in pods {
            if pod_volumes::is_terminal(&pod) {
                continue;
            }
            let Some(uid) = pod.metadata.uid.clone() else {
                continue;
            };
            let mut targets = Vec::new();
            for volume in self.resolve(&pod).await {
                // Drivers without GET_VOLUME_HEALTH are never called; unknown drivers, and drivers
                // not due this cycle, keep what is stored.
                let Some(driver) = drivers.get(&volume.driver).filter(|d| d.volume_health) else {
                    continue;
                };
                let attempt = self.deps.dirs.mount_attempt(&uid, &volume);
                if attempt.attempted() {
                    targets.push(Target {
                        volume,
                        driver: driver.clone(),
                        attempt,
                    });
                }
            }
            if !targets.is_empty() {
                work.push((pod, targets));
            }
        }
        if work.is_empty() {
            return Ok(());
        }
        // Spread the pods over the interval so a node with many pods does not probe in bursts.
        let pacer = Pacer::new(start, spread, work.len());
        let jobs = work.into_iter().enumerate().map(|(i, (pod, targets))| {
            let at = pacer.due(i);
            async move {
                tokio::time::sleep_until(at).await;
                self.probe_pod(&pod, targets).await
            }
        });
        futures::future::join_all(jobs)
            .await
            .into_iter()
            .collect::<Result<Vec<()>>>()?;
        Ok(())
    }

    /// The pod's CSI volumes, resolving PVC → PV once per pod.
    async fn resolve(&self, pod: &WatchedPod) -> Vec<CsiVolume> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let mut out = Vec::new();
        for (name, vref) in pod_volumes::volume_refs(pod) {
            let key = (uid.clone(), name.clone());
            let cached = self.state().resolved.get(&key).cloned();
            let resolution = match (cached, vref) {
                (Some(r), _) => Some(r),
                (None, VolumeRef::Inline(v)) => Some(Resolution::Csi(v)),
                (None, VolumeRef::Claim { claim }) => {
                    self.resolve_claim(&namespace, &claim, &name).await
                }
            };
            let Some(resolution) = resolution else {
                continue;
            };
            self.state().resolved.insert(key, resolution.clone());
            if let Resolution::Csi(v) = resolution {
                out.push(v);
            }
        }
        out
    }

    /// None while the claim is missing or unbound (asked again next cycle).
    async fn resolve_claim(
        &self,
        namespace: &str,
        claim: &str,
        volume_name: &str,
    ) -> Option<Resolution> {
        let cluster = &self.deps.cluster;
        let claim_name = format!("{namespace}/{claim}");
        let pvc = self.found("PVC", &claim_name, cluster.get_pvc(namespace, claim).await)?;
        let pv_name = pvc.volume_name()?.to_string();
        let pv = self.found("PV", &pv_name, cluster.get_pv(&pv_name).await)?;
        Some(match pod_volumes::csi_of_pv(&pv) {
            Some((driver, handle)) => Resolution::Csi(CsiVolume {
                name: volume_name.to_string(),
                driver,
                volume_handle: handle,
                dir_name: pv_name,
                inline: false,
            }),
            None => Resolution::NotCsi,
        })
    }

    /// The object a lookup answered, if any: a failed lookup of `kind` `name` is warned about
    /// once per distinct failure, and counts as none.
    fn found<T>(
        &self,
        kind: &str,
        name: &str,
        answer: std::result::Result<Option<T>, crate::cluster::ApiFailure>,
    ) -> Option<T> {
        answer.unwrap_or_else(|e| {
            let key = format!("{} {name} {e}", kind.to_lowercase());
            self.warn_once(key, || format!("reading {kind} {name}: {e}"));
            None
        })
    }

    async fn probe_volume(&self, target: &Target) -> Option<Vec<VolumeHealthEntry>> {
        let path = |p: &Option<std::path::PathBuf>| {
            p.as_ref()
                .map(|p| p.to_string_lossy().to_string())
                .unwrap_or_default()
        };
        let request = v1::NodeGetVolumeHealthRequest {
            volume_id: target.volume.volume_handle.clone(),
            volume_publish_path: path(&target.attempt.publish_path),
            staging_target_path: path(&target.attempt.staging_path),
        };
        let _permit = self.probes.acquire().await.ok()?;
        let call = async {
            target
                .driver
                .client
                .volume_health(request)
                .await
                .map_err(ProbeError::from)
        };
        let answer = timed(
            &self.deps.metrics.writer,
            &target.driver.name,
            METHOD_VOLUME,
            self.deps.timeout,
            call,
        )
        .await;
        self.failures.note(
            format_args!(
                "{METHOD_VOLUME} {} {}",
                target.driver.name, target.volume.volume_handle
            ),
            &answer,
        );
        answer.ok()
    }

    async fn probe_pod(&self, pod: &WatchedPod, targets: Vec<Target>) -> Result<()> {
        let answers = futures::future::join_all(targets.iter().map(|t| self.probe_volume(t))).await;
        let (Some(namespace), Some(name), Some(uid)) = (
            pod.metadata.namespace.clone(),
            pod.metadata.name.clone(),
            pod.metadata.uid.clone(),
        ) else {
            return Ok(());
        };
        // The freshest copy: its spec orders the stored list.
        let Some(pod) = self
            .deps
            .pods
            .pod(&namespace, &name)
            .filter(|p| p.metadata.uid.as_deref() == Some(&uid))
        else {
            return Ok(());
        };
        let object = ObjectRef {
            api_version: "v1",
            kind: "Pod",
            namespace: Some(namespace.clone()),
            name: name.clone(),
            uid: Some(uid.clone()),
        };
        let mut entries = BTreeMap::new();
        for (target, answer) in targets.iter().zip(answers) {
            let Some(answer) = answer else { continue };
            let report = volhealth_model::volume_report(&answer);
            let volume = &target.volume.name;
            if !self.notes.is_quiet(&report) {
                self.notes.note(
                    &format!("pod {namespace}/{name} volume {volume}"),
                    &object,
                    &format!("volume {volume} (driver {})", target.driver.name),
                    &report,
                );
            }
            entries.insert(volume.clone(), report);
        }
        let key = PodKey {
            namespace,
            name,
            uid,
        };
        let reports = EntryReports {
            entries,
            order: spec_order(&pod),
        };
        self.pod_offers.offer(key, reports);
        Ok(())
    }
}

/// The names of the pod's `spec.volumes`, in order.
fn spec_order(pod: &WatchedPod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .map(|v| v.name.clone())
        .collect()
}
