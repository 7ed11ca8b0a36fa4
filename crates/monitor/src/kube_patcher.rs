//! [`HealthPatcher`] over the Kubernetes API: a merge patch of the claim's `/status`.

use crate::claim_target::{Health, HealthPatcher, health_patch};
use crate::claims::ClaimKey;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use volhealth_model::VolumeHealthStatus;
use volhealth_writer::{ApiFailure, Patched};

/// Patches claims through a kube client.
#[derive(Clone)]
pub struct KubePatcher {
    client: Client,
}

impl KubePatcher {
    /// A patcher on `client`.
    pub fn new(client: Client) -> Self {
        KubePatcher { client }
    }
}

#[async_trait::async_trait]
impl HealthPatcher for KubePatcher {
    async fn patch_health(
        &self,
        key: &ClaimKey,
        health: Option<&VolumeHealthStatus>,
    ) -> Result<Patched<Health>, ApiFailure> {
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &key.namespace);
        let body = health_patch(health).map_err(|e| ApiFailure {
            code: Some(400),
            message: format!("encoding the patch: {e}"),
        })?;
        let pvc = api
            .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        Ok(Patched {
            resource_version: pvc.metadata.resource_version.clone(),
            value: pvc.status.and_then(|s| s.health_status),
        })
    }
}
