//! The monitor's object kind for the shared writer: a PVC's `status.healthStatus`, read from the
//! claim cache, patched through [`HealthPatcher`]; the writer's offer path decides what to write.

use crate::claims::{ClaimKey, ClaimStore};
use crate::metrics::Metrics;
use async_trait::async_trait;
use std::sync::Arc;
use volhealth_model::{Timestamp, VolumeHealthStatus, claim_conditions, condition_keys};
use volhealth_writer::events::Transition;
use volhealth_writer::{
    ApiFailure, Clock, HealthEvent, ObjectRef, Patched, QueuedTarget, Stored, Target,
};

/// The `resource` label of the monitor's writes.
pub const RESOURCE: &str = "persistentvolumeclaims/status";

/// The stored field: `None` when the claim has no `status.healthStatus`.
pub type Health = Option<VolumeHealthStatus>;

/// The boundary to the API server's write side for claims.
#[async_trait]
pub trait HealthPatcher: Send + Sync {
    /// Merge-patches `status.healthStatus` of the claim to `health` (None removes the field).
    async fn patch_health(
        &self,
        key: &ClaimKey,
        health: Option<&VolumeHealthStatus>,
    ) -> Result<Patched<Health>, ApiFailure>;
}

/// The merge patch body for `health` (`{"status":{"healthStatus":null}}` removes it).
pub fn health_patch(
    health: Option<&VolumeHealthStatus>,
) -> Result<serde_json::Value, serde_json::Error> {
    let value = match health {
        Some(h) => serde_json::to_value(h)?,
        None => serde_json::Value::Null,
    };
    Ok(serde_json::json!({ "status": { "healthStatus": value } }))
}

/// The Event object of a claim.
pub fn claim_ref(key: &ClaimKey, uid: Option<&str>) -> ObjectRef {
    ObjectRef::claim(&key.namespace, &key.name, uid)
}

/// PVC health as a [`Target`] of the shared writer.
pub struct ClaimTarget {
    /// The claim cache.
    pub claims: Arc<dyn ClaimStore>,
    /// The write side.
    pub patcher: Arc<dyn HealthPatcher>,
    /// Where `lastTransitionTime` comes from.
    pub clock: Arc<dyn Clock>,
    /// The metrics whose per-claim series follow what is stored.
    pub metrics: Arc<Metrics>,
}

impl Target for ClaimTarget {
    type Key = ClaimKey;
    type Value = Health;

    fn resource(&self) -> &'static str {
        RESOURCE
    }

    async fn patch(&self, key: &ClaimKey, value: &Health) -> Result<Patched<Health>, ApiFailure> {
        self.patcher.patch_health(key, value.as_ref()).await
    }

    fn written(&self, key: &ClaimKey, value: &Health) {
        self.metrics
            .set_claim_conditions(key, condition_keys(claim_conditions(value.as_ref())));
    }

    fn transitions(
        &self,
        key: &ClaimKey,
        stored: &Stored<Health>,
        before: &Health,
        after: &Health,
    ) -> Vec<HealthEvent> {
        let object = claim_ref(key, stored.uid.as_deref());
        Transition::claim(&object, before, after).events()
    }
}

impl QueuedTarget for ClaimTarget {
    fn cached(&self, key: &ClaimKey) -> Option<Stored<Health>> {
        self.claims.claim(key).map(|c| Stored {
            uid: Some(c.uid).filter(|u| !u.is_empty()),
            resource_version: c.resource_version,
            value: c.health,
        })
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volhealth_model::VolumeHealthCondition;

    #[test]
    fn patch_bodies() {
        assert_eq!(
            health_patch(None).unwrap(),
            serde_json::json!({"status": {"healthStatus": null}})
        );
        let h = VolumeHealthStatus {
            health_conditions: Some(vec![VolumeHealthCondition {
                status: "Degraded".into(),
                reason: "SlowDisk".into(),
                message: None,
            }]),
            last_transition_time: None,
        };
        assert_eq!(
            health_patch(Some(&h)).unwrap(),
            serde_json::json!({"status": {"healthStatus": {"healthConditions": [{"status": "Degraded", "reason": "SlowDisk"}]}}})
        );
    }
}
