//! The sample cluster `up` sets up: Nodes, CSINodes, the CSIDriver, a StorageClass, and PVCs, PVs
//! and Pods whose volumes really exist in the driver and are really staged and published on their
//! node, with the kubelet directories that say so. Every step is idempotent so a second `up`
//! resumes instead of duplicating.

use crate::failure::Context as _;
use crate::failure::Result;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use volhealth_csi::node_requests::{self, mount_capability};
use volhealth_csi::v1;

/// Namespace of the sample workload.
pub const NAMESPACE: &str = "default";
/// Name of the sample StorageClass.
pub const STORAGE_CLASS: &str = "volhealth-hostpath";
/// Sample volumes per node unless `--pvcs-per-node` says otherwise.
pub const VOLUMES_PER_NODE: u16 = 2;
/// Size of each sample volume.
const VOLUME_BYTES: i64 = 1 << 30;
/// Deadline of each CSI call `up` makes.
const CSI_TIMEOUT: Duration = Duration::from_secs(20);

/// One sample: a PVC, its PV and the pod using it on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// PVC name, `data-<n>`.
    pub claim: String,
    /// PV name, `pv-data-<n>` (also the CreateVolume name).
    pub volume: String,
    /// Pod name, `web-<n>`.
    pub pod: String,
    /// The node the pod runs on.
    pub node: String,
}

/// The samples for `nodes`: `per_node` per node, spread round-robin.
pub fn samples(nodes: &[String], per_node: u16) -> Vec<Sample> {
    spread(nodes, nodes.len() * usize::from(per_node))
}

/// `count` samples (`data-1`, `pv-data-1`, `web-1`, …) spread round-robin over `nodes`.
pub fn spread(nodes: &[String], count: usize) -> Vec<Sample> {
    (1..=count)
        .map(|n| Sample {
            claim: format!("data-{n}"),
            volume: format!("pv-data-{n}"),
            pod: format!("web-{n}"),
            node: nodes[(n - 1) % nodes.len()].clone(),
        })
        .collect()
}

fn typed<T: serde::de::DeserializeOwned>(value: serde_json::Value, what: &str) -> Result<T> {
    serde_json::from_value(value).with_context(|| format!("building the {what} object"))
}

/// Creates `obj`, or returns the stored one when it already exists; `true` when it was created.
async fn ensure<K>(api: &Api<K>, obj: K, what: &str) -> Result<(K, bool)>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), &obj).await {
        Ok(created) => Ok((created, true)),
        Err(kube::Error::Api(status)) if status.code == 409 => api
            .get(&name)
            .await
            .map(|kept| (kept, false))
            .with_context(|| format!("reading the existing {what} {name}")),
        Err(e) => Err(e).with_context(|| format!("creating {what} {name}")),
    }
}

/// What [`ensure_objects`] found of one sample.
#[derive(Debug, Clone)]
pub struct Ensured {
    /// The pod's UID.
    pub pod_uid: String,
    /// Whether any of the sample's objects had to be created (else all were kept).
    pub created: bool,
}

async fn patch_status<K>(
    api: &Api<K>,
    name: &str,
    status: serde_json::Value,
    what: &str,
) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .with_context(|| format!("setting the status of {what} {name}"))?;
    Ok(())
}

/// Registers the nodes, their CSINodes, the CSIDriver and the StorageClass.
pub async fn register_cluster(client: &kube::Client, driver: &str, nodes: &[String]) -> Result<()> {
    let node_api: Api<Node> = Api::all(client.clone());
    let csinode_api: Api<CSINode> = Api::all(client.clone());
    for node in nodes {
        let obj = typed(
            json!({"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}}),
            "Node",
        )?;
        ensure(&node_api, obj, "Node").await?;
        let now = jiff::Timestamp::now().to_string();
        let ready = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "VolhealthUp",
            "message": "simulated by volhealth up", "lastHeartbeatTime": now, "lastTransitionTime": now}]});
        patch_status(&node_api, node, ready, "Node").await?;
        let obj = typed(
            json!({"metadata": {"name": node}, "spec": {"drivers": [{"name": driver, "nodeID": node, "topologyKeys": []}]}}),
            "CSINode",
        )?;
        let (stored, _) = ensure(&csinode_api, obj, "CSINode").await?;
        let has_driver = stored.spec.drivers.iter().any(|d| d.name == driver);
        if !has_driver {
            let mut drivers =
                serde_json::to_value(&stored.spec.drivers).context("encoding CSINode drivers")?;
            if let Some(list) = drivers.as_array_mut() {
                list.push(json!({"name": driver, "nodeID": node, "topologyKeys": []}));
            }
            csinode_api
                .patch(
                    node,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"drivers": drivers}})),
                )
                .await
                .with_context(|| format!("adding {driver} to CSINode {node}"))?;
        }
    }
    let obj = typed(
        json!({"metadata": {"name": driver}, "spec": {"attachRequired": false, "podInfoOnMount": false,
            "volumeLifecycleModes": ["Persistent"]}}),
        "CSIDriver",
    )?;
    ensure(&Api::<CSIDriver>::all(client.clone()), obj, "CSIDriver").await?;
    let obj = typed(
        json!({"metadata": {"name": STORAGE_CLASS}, "provisioner": driver, "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate"}),
        "StorageClass",
    )?;
    ensure(
        &Api::<StorageClass>::all(client.clone()),
        obj,
        "StorageClass",
    )
    .await?;
    Ok(())
}

/// The CSI capability for a claim's access modes (the first one the CSI spec can express) and
/// volume mode (`block` for `volumeMode: Block`).
pub fn capability(access_modes: &[String], block: bool) -> v1::VolumeCapability {
    use v1::volume_capability::access_mode::Mode;
    let mode = match access_modes.first().map(String::as_str) {
        Some("ReadOnlyMany") => Mode::MultiNodeReaderOnly,
        Some("ReadWriteMany") => Mode::MultiNodeMultiWriter,
        Some("ReadWriteOncePod") => Mode::SingleNodeSingleWriter,
        _ => Mode::SingleNodeWriter,
    };
    let access_type = if block {
        v1::volume_capability::AccessType::Block(v1::volume_capability::BlockVolume::default())
    } else {
        v1::volume_capability::AccessType::Mount(v1::volume_capability::MountVolume::default())
    };
    v1::VolumeCapability {
        access_type: Some(access_type),
        access_mode: Some(v1::volume_capability::AccessMode { mode: mode as i32 }),
    }
}

/// A CSI request with the deadline of every call here.
fn request<T>(message: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    req.set_timeout(CSI_TIMEOUT);
    req
}

/// A channel to `plugin` (say "the controller plugin") at `endpoint`.
async fn connect(endpoint: &str, plugin: &str) -> Result<tonic::transport::Channel> {
    volhealth_csi::client::connect(endpoint, CSI_TIMEOUT)
        .await
        .with_context(|| format!("connecting to {plugin} at {endpoint}"))
}

async fn controller_client(
    controller: &str,
) -> Result<v1::controller_client::ControllerClient<tonic::transport::Channel>> {
    let channel = connect(controller, "the controller plugin").await?;
    Ok(v1::controller_client::ControllerClient::new(channel))
}

/// Creates the volume through the controller's CreateVolume (idempotent by name); returns its id.
pub async fn create_volume(controller: &str, name: &str) -> Result<String> {
    create_volume_with(controller, name, VOLUME_BYTES, mount_capability()).await
}

/// CreateVolume of `bytes` with `cap` (idempotent by name); returns the volume's id and capacity.
pub async fn create_volume_with(
    controller: &str,
    name: &str,
    bytes: i64,
    cap: v1::VolumeCapability,
) -> Result<String> {
    let mut client = controller_client(controller).await?;
    let req = request(v1::CreateVolumeRequest {
        name: name.to_string(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap],
        ..Default::default()
    });
    let resp = client
        .create_volume(req)
        .await
        .with_context(|| format!("CreateVolume {name}"))?
        .into_inner();
    let volume = resp
        .volume
        .with_context(|| format!("CreateVolume {name} answered without a volume"))?;
    Ok(volume.volume_id)
}

/// DeleteVolume (a volume already gone counts as deleted, as the CSI spec says).
pub async fn delete_volume(controller: &str, volume_id: &str) -> Result<()> {
    let mut client = controller_client(controller).await?;
    let req = request(v1::DeleteVolumeRequest {
        volume_id: volume_id.to_string(),
        ..Default::default()
    });
    client
        .delete_volume(req)
        .await
        .with_context(|| format!("DeleteVolume {volume_id}"))?;
    Ok(())
}

async fn node_client(
    node_endpoint: &str,
    node: &str,
) -> Result<v1::node_client::NodeClient<tonic::transport::Channel>> {
    let channel = connect(node_endpoint, &format!("the node plugin of {node}")).await?;
    Ok(v1::node_client::NodeClient::new(channel))
}

/// NodeUnpublishVolume of one pod's publish dir (see [`publish_dir`]), then removes the dir.
pub async fn unpublish(
    node_endpoint: &str,
    node: &str,
    pod_dir: &Path,
    volume_id: &str,
) -> Result<()> {
    let mut client = node_client(node_endpoint, node).await?;
    let req = request(node_requests::unpublish(volume_id, &pod_dir.join("mount")));
    client
        .node_unpublish_volume(req)
        .await
        .with_context(|| format!("NodeUnpublishVolume {volume_id} on {node}"))?;
    remove_dir(pod_dir)
}

/// NodeUnstageVolume of a volume's staging dir (see [`staging_dir`]), then removes the dir.
pub async fn unstage(
    node_endpoint: &str,
    node: &str,
    stage_dir: &Path,
    volume_id: &str,
) -> Result<()> {
    let mut client = node_client(node_endpoint, node).await?;
    let req = request(node_requests::unstage(
        volume_id,
        &stage_dir.join("globalmount"),
    ));
    client
        .node_unstage_volume(req)
        .await
        .with_context(|| format!("NodeUnstageVolume {volume_id} on {node}"))?;
    remove_dir(stage_dir)
}

/// Creates `dir` and the `vol_data.json` in it that the kubelet keeps beside a volume's mount.
fn write_vol_data(dir: &Path, vol_data: serde_json::Value) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join("vol_data.json");
    std::fs::write(&file, vol_data.to_string())
        .with_context(|| format!("writing {}", file.display()))
}

fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.display())),
    }
}

/// Ensures the PVC, PV and pod of one sample exist and are bound and running.
pub async fn ensure_objects(
    client: &kube::Client,
    driver: &str,
    sample: &Sample,
    volume_id: &str,
) -> Result<Ensured> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NAMESPACE);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let size = "1Gi";
    let pvc = typed(
        json!({"metadata": {"name": sample.claim, "namespace": NAMESPACE},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                     "resources": {"requests": {"storage": size}}, "volumeName": sample.volume}}),
        "PersistentVolumeClaim",
    )?;
    let (pvc, pvc_created) = ensure(&pvcs, pvc, "PersistentVolumeClaim").await?;
    let pvc_uid = pvc.metadata.uid.clone().unwrap_or_default();
    let pv = typed(
        json!({"metadata": {"name": sample.volume, "annotations": {"pv.kubernetes.io/provisioned-by": driver}},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": size},
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": STORAGE_CLASS,
                     "volumeMode": "Filesystem",
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": NAMESPACE, "name": sample.claim, "uid": pvc_uid},
                     "csi": {"driver": driver, "volumeHandle": volume_id}}}),
        "PersistentVolume",
    )?;
    let (_, pv_created) = ensure(&pvs, pv, "PersistentVolume").await?;
    patch_status(
        &pvs,
        &sample.volume,
        json!({"phase": "Bound"}),
        "PersistentVolume",
    )
    .await?;
    patch_status(
        &pvcs,
        &sample.claim,
        json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": size}}),
        "PersistentVolumeClaim",
    )
    .await?;
    let pod = typed(
        json!({"metadata": {"name": sample.pod, "namespace": NAMESPACE, "labels": {"app": "web"}},
            "spec": {"nodeName": sample.node,
                     "containers": [{"name": "web", "image": "nginx", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": sample.claim}}]}}),
        "Pod",
    )?;
    let (pod, pod_created) = ensure(&pods, pod, "Pod").await?;
    let now = jiff::Timestamp::now().to_string();
    patch_status(
        &pods,
        &sample.pod,
        json!({"phase": "Running", "startTime": now,
               "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
               "containerStatuses": [{"name": "web", "image": "nginx", "imageID": "", "ready": true, "started": true,
                                      "restartCount": 0, "state": {"running": {"startedAt": now}}}]}),
        "Pod",
    )
    .await?;
    let pod_uid = pod
        .metadata
        .uid
        .with_context(|| format!("pod {} has no uid", sample.pod))?;
    Ok(Ensured {
        pod_uid,
        created: pvc_created || pv_created || pod_created,
    })
}

/// Where the kubelet would stage a volume: `<root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount`.
pub fn staging_dir(kubelet_root: &Path, driver: &str, volume_id: &str) -> std::path::PathBuf {
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(volume_id.as_bytes()));
    kubelet_root
        .join("plugins")
        .join("kubernetes.io")
        .join("csi")
        .join(driver)
        .join(digest)
}

/// Where the kubelet would publish a pod's PV: `<root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount`.
pub fn publish_dir(kubelet_root: &Path, pod_uid: &str, pv: &str) -> std::path::PathBuf {
    kubelet_root
        .join("pods")
        .join(pod_uid)
        .join("volumes")
        .join("kubernetes.io~csi")
        .join(pv)
}

/// Where a sample's volume is made real: the driver's controller plugin, and the node plugin
/// and kubelet root of the sample's node.
#[derive(Debug, Clone, Copy)]
pub struct Plugins<'a> {
    /// The driver's name.
    pub driver: &'a str,
    /// The controller plugin's endpoint.
    pub controller: &'a str,
    /// The node plugin's endpoint on the sample's node.
    pub node_endpoint: &'a str,
    /// The kubelet root directory of the sample's node.
    pub kubelet_root: &'a Path,
}

/// One sample end to end, as a provisioner and the kubelet would make it: the volume created
/// through the controller plugin, its PV, PVC and pod, and the volume staged and published on
/// its node. Returns the volume id, and whether any object had to be created.
pub async fn provision_sample(
    client: &kube::Client,
    plugins: Plugins<'_>,
    sample: &Sample,
) -> Result<(String, bool)> {
    let volume_id = create_volume(plugins.controller, &sample.volume).await?;
    let ensured = ensure_objects(client, plugins.driver, sample, &volume_id).await?;
    stage_and_publish(
        plugins.node_endpoint,
        plugins.kubelet_root,
        plugins.driver,
        sample,
        &volume_id,
        &ensured.pod_uid,
    )
    .await?;
    Ok((volume_id, ensured.created))
}

/// Stages and publishes the volume on its node's plugin, and writes the `vol_data.json` files
/// the kubelet keeps beside them (what the agent reads to know the volume is in use).
pub async fn stage_and_publish(
    node_endpoint: &str,
    kubelet_root: &Path,
    driver: &str,
    sample: &Sample,
    volume_id: &str,
    pod_uid: &str,
) -> Result<()> {
    let mut client = node_client(node_endpoint, &sample.node).await?;
    let stage_dir = staging_dir(kubelet_root, driver, volume_id);
    let staging = stage_dir.join("globalmount");
    write_vol_data(
        &stage_dir,
        json!({"driverName": driver, "volumeHandle": volume_id, "specVolID": sample.volume}),
    )?;
    let req = request(node_requests::stage(volume_id, &staging));
    client
        .node_stage_volume(req)
        .await
        .with_context(|| format!("NodeStageVolume {volume_id} on {}", sample.node))?;

    let pod_dir = publish_dir(kubelet_root, pod_uid, &sample.volume);
    write_vol_data(
        &pod_dir,
        json!({"driverName": driver, "volumeHandle": volume_id, "specVolID": sample.volume,
            "nodeName": sample.node, "attachmentID": ""}),
    )?;
    let target = pod_dir.join("mount");
    let req = request(node_requests::publish(volume_id, &staging, &target));
    client.node_publish_volume(req).await.with_context(|| {
        format!(
            "NodePublishVolume {volume_id} for pod {} on {}",
            sample.pod, sample.node
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_spread_over_the_nodes() {
        let nodes = vec!["node-1".to_string(), "node-2".to_string()];
        let s = samples(&nodes, VOLUMES_PER_NODE);
        assert_eq!(s.len(), 4);
        assert_eq!(
            s[0],
            Sample {
                claim: "data-1".into(),
                volume: "pv-data-1".into(),
                pod: "web-1".into(),
                node: "node-1".into()
            }
        );
        assert_eq!(s[1].node, "node-2");
        assert_eq!(s[2].node, "node-1");
        let many = samples(&nodes, 50);
        assert_eq!(many.len(), 100);
        assert_eq!(many[99].claim, "data-100");
        assert_eq!(many.iter().filter(|s| s.node == "node-2").count(), 50);
        assert!(samples(&nodes, 0).is_empty());
    }

    #[test]
    fn kubelet_paths_match_the_kubelet_layout() {
        let root = Path::new("/k");
        let st = staging_dir(root, "d", "vol-1");
        assert!(st.starts_with("/k/plugins/kubernetes.io/csi/d"));
        assert_eq!(st.file_name().unwrap().len(), 64);
        assert_eq!(
            publish_dir(root, "uid", "pv"),
            Path::new("/k/pods/uid/volumes/kubernetes.io~csi/pv")
        );
    }
}
