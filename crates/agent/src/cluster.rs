//! Boundary to the Kubernetes API: the few reads and the status writes the agent makes.

use crate::watched::{WatchedNode, WatchedPod, WatchedPv, WatchedPvc};
use async_trait::async_trait;
use k8s_openapi::api::core::v1::PodVolumeHealth;
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, StorageHealth};
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::sync::Arc;

pub use volhealth_writer::ApiFailure;
use volhealth_writer::{EventSink, HealthEvent, KubeEventSink};

/// The Kubernetes requests the agent makes.
#[async_trait]
pub trait Cluster: Send + Sync {
    /// GET nodes/{name}.
    async fn get_node(&self, name: &str) -> Result<Option<WatchedNode>, ApiFailure>;
    /// GET a PVC.
    async fn get_pvc(&self, namespace: &str, name: &str) -> Result<Option<WatchedPvc>, ApiFailure>;
    /// GET a PV.
    async fn get_pv(&self, name: &str) -> Result<Option<WatchedPv>, ApiFailure>;
    /// Merge-patch pods/{name}/status with the full volumeHealth list (null when empty).
    async fn patch_pod_volume_health(
        &self,
        namespace: &str,
        name: &str,
        value: &[PodVolumeHealth],
    ) -> Result<WatchedPod, ApiFailure>;
    /// GET csinodes/{name}.
    async fn get_csinode(&self, name: &str) -> Result<Option<CSINode>, ApiFailure>;
    /// POST a CSINode.
    async fn create_csinode(&self, csinode: &CSINode) -> Result<CSINode, ApiFailure>;
    /// Merge-patch csinodes/{name} spec.drivers (full list), guarded by the resourceVersion read.
    async fn patch_csinode_drivers(
        &self,
        name: &str,
        resource_version: Option<&str>,
        drivers: &[CSINodeDriver],
    ) -> Result<CSINode, ApiFailure>;
    /// Merge-patch csinodes/{name} with `patch`, which touches `metadata.annotations` alone.
    async fn patch_csinode_metadata(
        &self,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<CSINode, ApiFailure>;
    /// Merge-patch csinodes/{name}/status with the full storageHealth list (null when empty).
    async fn patch_csinode_storage_health(
        &self,
        name: &str,
        value: &[StorageHealth],
    ) -> Result<CSINode, ApiFailure>;
    /// Creates an Event standing for `count` occurrences.
    async fn create_event(&self, event: &HealthEvent, count: i32) -> Result<(), ApiFailure>;
}

/// The component name on Events.
pub const COMPONENT: &str = "volhealth-agent";

/// [`Cluster`] over a kube client.
#[derive(Clone)]
pub struct KubeCluster {
    client: kube::Client,
    events: KubeEventSink,
}

impl KubeCluster {
    /// Wraps a client of the agent on `node`.
    pub fn new(client: kube::Client, node: &str) -> Arc<KubeCluster> {
        let events = KubeEventSink::new(
            client.clone(),
            COMPONENT,
            node.to_string(),
            Some(node.to_string()),
        );
        Arc::new(KubeCluster { client, events })
    }
}

fn list_or_null<T: serde::Serialize>(value: &[T]) -> Result<serde_json::Value, ApiFailure> {
    if value.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    serde_json::to_value(value).map_err(|e| ApiFailure {
        code: Some(400),
        message: format!("encoding the patch: {e}"),
    })
}

#[async_trait]
impl Cluster for KubeCluster {
    async fn get_node(&self, name: &str) -> Result<Option<WatchedNode>, ApiFailure> {
        Ok(Api::<WatchedNode>::all(self.client.clone())
            .get_opt(name)
            .await?)
    }

    async fn get_pvc(&self, namespace: &str, name: &str) -> Result<Option<WatchedPvc>, ApiFailure> {
        Ok(
            Api::<WatchedPvc>::namespaced(self.client.clone(), namespace)
                .get_opt(name)
                .await?,
        )
    }

    async fn get_pv(&self, name: &str) -> Result<Option<WatchedPv>, ApiFailure> {
        Ok(Api::<WatchedPv>::all(self.client.clone())
            .get_opt(name)
            .await?)
    }

    async fn patch_pod_volume_health(
        &self,
        namespace: &str,
        name: &str,
        value: &[PodVolumeHealth],
    ) -> Result<WatchedPod, ApiFailure> {
        let patch = serde_json::json!({ "status": { "volumeHealth": list_or_null(value)? } });
        let api = Api::<WatchedPod>::namespaced(self.client.clone(), namespace);
        Ok(api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?)
    }

    async fn get_csinode(&self, name: &str) -> Result<Option<CSINode>, ApiFailure> {
        Ok(Api::<CSINode>::all(self.client.clone())
            .get_opt(name)
            .await?)
    }

    async fn create_csinode(&self, csinode: &CSINode) -> Result<CSINode, ApiFailure> {
        Ok(Api::<CSINode>::all(self.client.clone())
            .create(&PostParams::default(), csinode)
            .await?)
    }

    async fn patch_csinode_drivers(
        &self,
        name: &str,
        resource_version: Option<&str>,
        drivers: &[CSINodeDriver],
    ) -> Result<CSINode, ApiFailure> {
        let drivers = serde_json::to_value(drivers).map_err(|e| ApiFailure {
            code: Some(400),
            message: format!("encoding the patch: {e}"),
        })?;
        let mut patch = serde_json::json!({ "spec": { "drivers": drivers } });
        if let Some(rv) = resource_version {
            patch["metadata"] = serde_json::json!({ "resourceVersion": rv });
        }
        let api = Api::<CSINode>::all(self.client.clone());
        Ok(api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?)
    }

    async fn patch_csinode_metadata(
        &self,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<CSINode, ApiFailure> {
        let api = Api::<CSINode>::all(self.client.clone());
        Ok(api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?)
    }

    async fn patch_csinode_storage_health(
        &self,
        name: &str,
        value: &[StorageHealth],
    ) -> Result<CSINode, ApiFailure> {
        let patch = serde_json::json!({ "status": { "storageHealth": list_or_null(value)? } });
        let api = Api::<CSINode>::all(self.client.clone());
        Ok(api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?)
    }

    async fn create_event(&self, event: &HealthEvent, count: i32) -> Result<(), ApiFailure> {
        self.events.create(event, count).await
    }
}

/// Boundary to the pods bound to this node (a watch in production).
pub trait PodSource: Send + Sync {
    /// The pods now.
    fn pods(&self) -> Vec<Arc<WatchedPod>>;
    /// One pod now.
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<WatchedPod>>;
}

impl PodSource for kube::runtime::reflector::Store<WatchedPod> {
    fn pods(&self) -> Vec<Arc<WatchedPod>> {
        self.state()
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<WatchedPod>> {
        self.get(&kube::runtime::reflector::ObjectRef::new(name).within(namespace))
    }
}
