//! [`StatusWriter`] over the Kubernetes API: merge patches of `/status` and core/v1 Events.

use crate::claims::ClaimKey;
use crate::status_writer::{ClaimEvent, Patched, StatusWriter, WriteError, health_patch};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use volhealth_model::VolumeHealthStatus;

/// The component name on Events.
pub const COMPONENT: &str = "volhealth-monitor";

/// Writes through a kube client.
#[derive(Clone)]
pub struct KubeWriter {
    client: Client,
    instance: String,
}

impl KubeWriter {
    /// A writer whose Events name `instance` as reporting instance.
    pub fn new(client: Client, instance: String) -> Self {
        KubeWriter { client, instance }
    }
}

fn classify(e: kube::Error) -> WriteError {
    match e {
        kube::Error::Api(s) if s.code == 404 => WriteError::NotFound,
        kube::Error::Api(s) if s.code == 429 || s.code >= 500 => {
            WriteError::Unavailable(format!("{} {}", s.code, s.message))
        }
        kube::Error::Api(s) => WriteError::Rejected(format!("{} {}", s.code, s.message)),
        other => WriteError::Unavailable(other.to_string()),
    }
}

impl StatusWriter for KubeWriter {
    async fn patch_health(
        &self,
        key: &ClaimKey,
        health: Option<&VolumeHealthStatus>,
    ) -> Result<Patched, WriteError> {
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &key.namespace);
        let body = health_patch(health)
            .map_err(|e| WriteError::Rejected(format!("encoding the patch: {e}")))?;
        let pvc = api
            .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(classify)?;
        Ok(Patched {
            resource_version: pvc.metadata.resource_version.clone(),
            health: pvc.status.and_then(|s| s.health_status),
        })
    }

    async fn event(&self, e: &ClaimEvent) -> Result<(), WriteError> {
        let api = Api::<Event>::namespaced(self.client.clone(), &e.key.namespace);
        let now = jiff::Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}.", e.key.name)),
                namespace: Some(e.key.namespace.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                name: Some(e.key.name.clone()),
                namespace: Some(e.key.namespace.clone()),
                uid: (!e.uid.is_empty()).then(|| e.uid.clone()),
                ..Default::default()
            },
            reason: Some(e.reason.to_string()),
            message: Some(e.message.clone()),
            type_: Some(e.event_type.as_str().to_string()),
            reporting_component: Some(COMPONENT.to_string()),
            reporting_instance: Some(self.instance.clone()),
            source: Some(EventSource {
                component: Some(COMPONENT.to_string()),
                host: None,
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            action: Some("HealthCheck".into()),
            count: Some(1),
            ..Default::default()
        };
        api.create(&PostParams::default(), &event)
            .await
            .map_err(classify)?;
        Ok(())
    }
}
