//! Per-pod volume health: probe each attempted CSI volume with NodeGetVolumeHealth and write pod.status.volumeHealth.

use crate::agent::{Agent, Resolution, Written, pod_key};
use crate::drivers::Driver;
use crate::error::Result;
use crate::kubelet_dirs::MountAttempt;
use crate::metrics::METHOD_VOLUME;
use crate::pod_volumes::{self, CsiVolume, VolumeRef};
use k8s_openapi::api::core::v1::{Pod, PodVolumeHealth};
use std::collections::BTreeMap;
use std::sync::Arc;
use volhealth_csi::v1;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;

/// One volume to probe.
struct Target {
    volume: CsiVolume,
    driver: Arc<Driver>,
    attempt: MountAttempt,
}

impl Agent {
    pub(crate) async fn volume_cycle(
        &self,
        drivers: &BTreeMap<String, Arc<Driver>>,
        start: tokio::time::Instant,
    ) -> Result<()> {
        let mut work: Vec<(Arc<Pod>, Vec<Target>)> = Vec::new();
        for pod in self.deps.pods.pods() {
            if pod_volumes::is_terminal(&pod) {
                continue;
            }
            let Some(uid) = pod.metadata.uid.clone() else {
                continue;
            };
            let mut targets = Vec::new();
            for volume in self.resolve(&pod).await {
                // Drivers without GET_VOLUME_HEALTH are never called; unknown drivers keep what is stored.
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
        let spacing = self.deps.interval / u32::try_from(work.len()).unwrap_or(u32::MAX);
        let jobs = work.into_iter().enumerate().map(|(i, (pod, targets))| {
            let at = start + spacing * u32::try_from(i).unwrap_or(u32::MAX);
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
    async fn resolve(&self, pod: &Pod) -> Vec<CsiVolume> {
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
        let pvc = match cluster.get_pvc(namespace, claim).await {
            Ok(Some(pvc)) => pvc,
            Ok(None) => return None,
            Err(e) => {
                self.warn_once(format!("pvc {namespace}/{claim} {e}"), || {
                    format!("reading PVC {namespace}/{claim}: {e}")
                });
                return None;
            }
        };
        let pv_name = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|n| !n.is_empty())?;
        let pv = match cluster.get_pv(&pv_name).await {
            Ok(Some(pv)) => pv,
            Ok(None) => return None,
            Err(e) => {
                self.warn_once(format!("pv {pv_name} {e}"), || {
                    format!("reading PV {pv_name}: {e}")
                });
                return None;
            }
        };
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
        let started = tokio::time::Instant::now();
        let answer = tokio::time::timeout(
            self.deps.timeout,
            target.driver.client.volume_health(request),
        )
        .await;
        let ok = matches!(answer, Ok(Ok(_)));
        self.deps
            .metrics
            .probe(&target.driver.name, METHOD_VOLUME, ok, started.elapsed());
        match answer {
            Ok(Ok(entries)) => Some(entries),
            Ok(Err(status)) => {
                tracing::debug!(
                    driver = %target.driver.name, volume = %target.volume.volume_handle,
                    "NodeGetVolumeHealth failed, keeping the stored health: {}: {}", status.code(), status.message()
                );
                None
            }
            Err(_) => {
                tracing::debug!(
                    driver = %target.driver.name, volume = %target.volume.volume_handle,
                    "NodeGetVolumeHealth timed out after {:?}, keeping the stored health", self.deps.timeout
                );
                None
            }
        }
    }

    async fn probe_pod(&self, pod: &Pod, targets: Vec<Target>) -> Result<()> {
        let answers = futures::future::join_all(targets.iter().map(|t| self.probe_volume(t))).await;
        let (Some(namespace), Some(name), Some(uid)) = (
            pod.metadata.namespace.clone(),
            pod.metadata.name.clone(),
            pod.metadata.uid.clone(),
        ) else {
            return Ok(());
        };
        // The freshest copy, so the comparison is against what is stored now.
        let Some(pod) = self
            .deps
            .pods
            .pod(&namespace, &name)
            .filter(|p| p.metadata.uid.as_deref() == Some(&uid))
        else {
            return Ok(());
        };
        let stored = self.stored_volume_health(&pod);
        let mut list = stored.clone();
        let now = self.deps.clock.now();
        let mut changed = false;
        for (target, answer) in targets.iter().zip(answers) {
            let Some(entries) = answer else { continue };
            let report = volhealth_model::volume_report(&entries);
            let object = format!("pod {namespace}/{name} volume {}", target.volume.name);
            for unknown in &report.unknown {
                self.deps.metrics.unknown_condition(unknown.raw_status);
                self.warn_once(format!("unknown {object} {} {}", unknown.raw_status, unknown.reason), || {
                    format!(
                        "{object}: driver {} reported unknown health status {} (reason {:?}); not treated as healthy",
                        target.driver.name, unknown.raw_status, unknown.reason
                    )
                });
            }
            for fix in &report.fixes {
                self.warn_once(format!("fix {object} {fix}"), || format!("{object}: {fix}"));
            }
            let position = list.iter().position(|e| e.name == target.volume.name);
            if let Some(write) = volhealth_model::reconcile_pod_volume(
                position.map(|i| &list[i]),
                &target.volume.name,
                &report,
                now,
            ) {
                write.apply_at(&mut list, position);
                changed = true;
            }
            let conditions: Vec<(String, String)> = list
                .iter()
                .find(|e| e.name == target.volume.name)
                .and_then(|e| e.health_conditions.as_ref())
                .map(|c| {
                    c.iter()
                        .map(|c| (c.status.clone(), c.reason.clone()))
                        .collect()
                })
                .unwrap_or_default();
            self.deps
                .metrics
                .set_volume(&namespace, &name, &target.volume.name, &conditions);
        }
        if !changed {
            return Ok(());
        }
        sort_by_spec_order(&pod, &mut list);
        self.write_pod(&pod, &namespace, &name, &uid, list).await
    }

    /// What is stored for the pod: the watched copy, or what the last write returned while the watch lags behind.
    fn stored_volume_health(&self, pod: &Pod) -> Vec<PodVolumeHealth> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut state = self.state();
        if let Some(written) = state.written.get(&uid) {
            if written.newer_than(pod.metadata.resource_version.as_deref()) {
                return written.value.clone();
            }
            state.written.remove(&uid);
        }
        pod.status
            .as_ref()
            .and_then(|s| s.volume_health.clone())
            .unwrap_or_default()
    }

    async fn write_pod(
        &self,
        pod: &Pod,
        namespace: &str,
        name: &str,
        uid: &str,
        list: Vec<PodVolumeHealth>,
    ) -> Result<()> {
        let key = pod_key(uid);
        if !self
            .state()
            .backoff
            .allowed(&key, tokio::time::Instant::now())
        {
            return Ok(());
        }
        const RESOURCE: &str = "pods/status";
        match self
            .deps
            .cluster
            .patch_pod_volume_health(namespace, name, &list)
            .await
        {
            Ok(returned) => {
                let rv_after = returned.metadata.resource_version.clone();
                let got = returned
                    .status
                    .and_then(|s| s.volume_health)
                    .unwrap_or_default();
                if !list.is_empty() && got.is_empty() {
                    self.deps.metrics.write(RESOURCE, "dropped");
                    if self
                        .state()
                        .backoff
                        .failed(&key, tokio::time::Instant::now())
                    {
                        tracing::warn!(
                            "pod {namespace}/{name}: the API server accepted the write but did not store \
                             status.volumeHealth (is the CSIVolumeHealth feature gate off there?); retrying slowly"
                        );
                    }
                    return Ok(());
                }
                self.deps.metrics.write(RESOURCE, "success");
                let mut state = self.state();
                if state.backoff.succeeded(&key) {
                    tracing::info!("pod {namespace}/{name}: status write accepted again");
                }
                state.written.insert(
                    uid.to_string(),
                    Written {
                        rv_before: pod.metadata.resource_version.clone(),
                        rv_after,
                        value: got,
                    },
                );
                tracing::info!(pod = %format!("{namespace}/{name}"), volumes = list.len(), "wrote pod volume health");
                Ok(())
            }
            Err(e) if e.is_forbidden() => {
                self.deps.metrics.write(RESOURCE, "rejected");
                Err(self.identity_error(&format!("patching pods/{name}/status in {namespace}"), &e))
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => {
                let rejected = e.is_rejected();
                self.deps
                    .metrics
                    .write(RESOURCE, if rejected { "rejected" } else { "error" });
                if rejected {
                    if self
                        .state()
                        .backoff
                        .failed(&key, tokio::time::Instant::now())
                    {
                        tracing::warn!(
                            "pod {namespace}/{name}: the API server refused the status write ({e}); retrying slowly"
                        );
                    }
                } else {
                    tracing::warn!(
                        "pod {namespace}/{name}: writing status failed ({e}); retrying next cycle"
                    );
                }
                Ok(())
            }
        }
    }
}

fn sort_by_spec_order(pod: &Pod, list: &mut [PodVolumeHealth]) {
    let order: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .map(|v| v.name.as_str())
        .collect();
    list.sort_by_key(|e| {
        order
            .iter()
            .position(|n| *n == e.name)
            .unwrap_or(usize::MAX)
    });
}
