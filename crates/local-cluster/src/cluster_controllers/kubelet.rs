//! The kubelet's volume role on every node `up` simulates: a pod bound to the node whose claims
//! are bound to this driver's PVs gets each volume staged and published by the node's plugin,
//! in the kubelet's directory layout (what the agent reads), and is then marked Running. Publish
//! dirs of pods that are gone are unpublished, and staged volumes no pod needs are unstaged.

use super::backoff::Retries;
use super::schedule::claims_of;
use super::{Config, NodePlugin, Snapshot};
use crate::failure::Context as _;
use crate::failure::{Result, chain};
use crate::up::workload::{self, Sample};
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tokio::time::Instant;

/// One CSI volume a pod uses: its PV name and volume handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolume {
    /// The claim.
    pub claim: String,
    /// The PV name.
    pub pv: String,
    /// The CSI volume handle.
    pub handle: String,
}

/// The driver's volumes `pod` uses, or None while one of its claims is not bound to one yet.
pub fn pod_volumes(pod: &Pod, snap: &Snapshot, driver: &str) -> Option<Vec<PodVolume>> {
    let ns = pod.metadata.namespace.as_deref();
    claims_of(pod)
        .into_iter()
        .map(|claim| {
            let pvc = snap.claims.iter().find(|c| {
                c.metadata.namespace.as_deref() == ns && c.metadata.name.as_deref() == Some(&claim)
            })?;
            let pv_name = pvc.spec.as_ref()?.volume_name.clone()?;
            let pv: &PersistentVolume = snap
                .volumes
                .iter()
                .find(|v| v.metadata.name.as_deref() == Some(&pv_name))?;
            let csi = pv
                .spec
                .as_ref()?
                .csi
                .as_ref()
                .filter(|c| c.driver == driver)?;
            Some(PodVolume {
                claim,
                pv: pv_name,
                handle: csi.volume_handle.clone(),
            })
        })
        .collect()
}

fn on_node<'a>(snap: &'a Snapshot, node: &'a str) -> impl Iterator<Item = &'a Pod> + 'a {
    snap.pods.iter().filter(move |p| {
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
            && p.metadata.deletion_timestamp.is_none()
    })
}

/// The status of a pod whose containers all started, as the kubelet reports it.
pub fn running_status(pod: &Pod) -> serde_json::Value {
    let now = jiff::Timestamp::now().to_string();
    let containers: Vec<serde_json::Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            json!({"name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                   "ready": true, "started": true, "restartCount": 0,
                   "state": {"running": {"startedAt": now}}})
        })
        .collect();
    json!({"phase": "Running", "startTime": now,
           "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now},
                          {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
           "containerStatuses": containers})
}

async fn start_pod(
    client: &kube::Client,
    cfg: &Config,
    node: &str,
    plugin: &NodePlugin,
    pod: &Pod,
    volumes: &[PodVolume],
) -> Result<()> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    for v in volumes {
        let sample = Sample {
            claim: v.claim.clone(),
            volume: v.pv.clone(),
            pod: name.clone(),
            node: node.to_string(),
        };
        workload::stage_and_publish(
            &plugin.endpoint,
            &plugin.kubelet_root,
            &cfg.driver,
            &sample,
            &v.handle,
            &uid,
        )
        .await?;
    }
    Api::<Pod>::namespaced(client.clone(), &ns)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": running_status(pod)})),
        )
        .await
        .with_context(|| format!("marking pod {ns}/{name} Running"))?;
    Ok(())
}

/// Stages, publishes and starts every pending pod on the simulated nodes.
pub async fn mount(
    client: &kube::Client,
    cfg: &Config,
    snap: &Snapshot,
    retries: &mut Retries,
    now: Instant,
) {
    for (node, plugin) in &cfg.nodes {
        for pod in on_node(snap, node) {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(phase, Some("Running" | "Succeeded" | "Failed")) {
                continue;
            }
            let Some(volumes) = pod_volumes(pod, snap, &cfg.driver) else {
                continue;
            };
            let key = format!("mount/{}", pod.metadata.uid.as_deref().unwrap_or(""));
            if volumes.is_empty() || !retries.ready(&key, now) {
                continue;
            }
            let what = format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or(""),
                pod.metadata.name.as_deref().unwrap_or("")
            );
            match start_pod(client, cfg, node, plugin, pod, &volumes).await {
                Ok(()) => {
                    retries.succeeded(&key);
                    tracing::info!(
                        "pod {what} on {node}: {} volume(s) staged and published, Running",
                        volumes.len()
                    );
                }
                Err(e) => {
                    let delay = retries.failed(&key, now);
                    tracing::warn!(
                        "starting pod {what} on {node}: {}; retrying in {delay:?}",
                        chain(&e)
                    );
                }
            }
        }
    }
}

/// `(dir, volume handle)` of each `*/vol_data.json` of this driver's under `parent`'s children
/// matched by `dirs` (a list of directories).
fn recorded(dirs: Vec<PathBuf>, driver: &str) -> Vec<(PathBuf, String)> {
    dirs.into_iter()
        .filter_map(|dir| {
            let text = std::fs::read_to_string(dir.join("vol_data.json")).ok()?;
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            (v["driverName"] == driver)
                .then(|| {
                    v["volumeHandle"]
                        .as_str()
                        .map(|h| (dir.clone(), h.to_string()))
                })
                .flatten()
        })
        .collect()
}

fn children(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Every publish dir under a kubelet root: `(pod uid, dir, handle)`.
fn publish_dirs(root: &Path, driver: &str) -> Vec<(String, PathBuf, String)> {
    children(&root.join("pods"))
        .into_iter()
        .flat_map(|pod_dir| {
            let uid = pod_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let vols = children(&pod_dir.join("volumes").join("kubernetes.io~csi"));
            recorded(vols, driver)
                .into_iter()
                .map(move |(d, h)| (uid.clone(), d, h))
        })
        .collect()
}

async fn unmount_node(
    cfg: &Config,
    snap: &Snapshot,
    node: &str,
    plugin: &NodePlugin,
    retries: &mut Retries,
    now: Instant,
) {
    let live: BTreeSet<&str> = on_node(snap, node)
        .filter_map(|p| p.metadata.uid.as_deref())
        .collect();
    let mut needed: BTreeSet<String> = on_node(snap, node)
        .flat_map(|p| pod_volumes(p, snap, &cfg.driver).unwrap_or_default())
        .map(|v| v.handle)
        .collect();
    for (uid, dir, handle) in publish_dirs(&plugin.kubelet_root, &cfg.driver) {
        if live.contains(uid.as_str()) {
            needed.insert(handle);
            continue;
        }
        let key = format!("unpublish/{}", dir.display());
        if !retries.ready(&key, now) {
            needed.insert(handle);
            continue;
        }
        match workload::unpublish(&plugin.endpoint, node, &dir, &handle).await {
            Ok(()) => {
                retries.succeeded(&key);
                remove_empty_pod_dir(&plugin.kubelet_root, &uid);
                tracing::info!("unpublished {handle} on {node}: pod {uid} is gone");
            }
            Err(e) => {
                needed.insert(handle);
                let delay = retries.failed(&key, now);
                tracing::warn!("{}; retrying in {delay:?}", chain(&e));
            }
        }
    }
    let stage_root = workload::staging_dir(&plugin.kubelet_root, &cfg.driver, "x");
    let stage_root = stage_root
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    for (dir, handle) in recorded(children(&stage_root), &cfg.driver) {
        let key = format!("unstage/{}", dir.display());
        if needed.contains(&handle) || !retries.ready(&key, now) {
            continue;
        }
        match workload::unstage(&plugin.endpoint, node, &dir, &handle).await {
            Ok(()) => {
                retries.succeeded(&key);
                tracing::info!("unstaged {handle} on {node}: no pod uses it");
            }
            Err(e) => {
                let delay = retries.failed(&key, now);
                tracing::warn!("{}; retrying in {delay:?}", chain(&e));
            }
        }
    }
}

fn remove_empty_pod_dir(root: &Path, uid: &str) {
    let pod_dir = root.join("pods").join(uid);
    let csi = pod_dir.join("volumes").join("kubernetes.io~csi");
    if children(&csi).is_empty()
        && let Err(e) = std::fs::remove_dir_all(&pod_dir)
    {
        tracing::debug!("removing {}: {e}", pod_dir.display());
    }
}

/// Unpublishes the volumes of pods that are gone and unstages volumes no pod needs, per node.
pub async fn unmount(cfg: &Config, snap: &Snapshot, retries: &mut Retries, now: Instant) {
    for (node, plugin) in &cfg.nodes {
        unmount_node(cfg, snap, node, plugin, retries, now).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn snapshot(claim_phase_bound: bool) -> Snapshot {
        let mut claim = json!({"metadata": {"name": "c1", "namespace": "ns", "uid": "cu"},
            "spec": {"storageClassName": "sc"}});
        if claim_phase_bound {
            claim["spec"]["volumeName"] = json!("pvc-cu");
        }
        let pv = json!({"metadata": {"name": "pvc-cu"}, "spec": {"csi": {"driver": "d", "volumeHandle": "vol-1"}}});
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "uid": "pu"},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}],
                     "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c1"}}]}});
        Snapshot {
            claims: vec![serde_json::from_value(claim).unwrap()],
            volumes: vec![serde_json::from_value(pv).unwrap()],
            pods: vec![serde_json::from_value(pod).unwrap()],
            ..Default::default()
        }
    }

    #[test]
    fn a_pods_volumes_are_known_once_its_claims_are_bound() {
        let snap = snapshot(false);
        assert_eq!(pod_volumes(&snap.pods[0], &snap, "d"), None);
        let snap = snapshot(true);
        assert_eq!(
            pod_volumes(&snap.pods[0], &snap, "d"),
            Some(vec![PodVolume {
                claim: "c1".into(),
                pv: "pvc-cu".into(),
                handle: "vol-1".into()
            }])
        );
        // Another driver's volume is not this kubelet role's to mount.
        assert_eq!(pod_volumes(&snap.pods[0], &snap, "other"), None);
    }

    #[test]
    fn running_status_has_ready_and_every_container() {
        let snap = snapshot(true);
        let s = running_status(&snap.pods[0]);
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["conditions"][0]["type"], "Ready");
        assert_eq!(s["containerStatuses"][0]["name"], "app");
        assert_eq!(s["containerStatuses"].as_array().map(Vec::len), Some(1));
        let _: Value = s;
    }

    #[test]
    fn publish_dirs_are_read_from_the_kubelet_layout() {
        let tmp = tempfile::tempdir().unwrap();
        // Pod `uid` has volume `pv` of `driver` published: returns its publish dir.
        let published = |uid: &str, pv: &str, driver: &str, handle: &str| {
            let dir = workload::publish_dir(tmp.path(), uid, pv);
            std::fs::create_dir_all(&dir).unwrap();
            let vol_data = serde_json::json!({"driverName": driver, "volumeHandle": handle});
            std::fs::write(dir.join("vol_data.json"), vol_data.to_string()).unwrap();
            dir
        };
        let dir = published("pu", "pvc-cu", "d", "vol-1");
        published("pu2", "pv-x", "e", "vol-2");
        assert_eq!(
            publish_dirs(tmp.path(), "d"),
            vec![("pu".to_string(), dir, "vol-1".to_string())]
        );
    }
}
