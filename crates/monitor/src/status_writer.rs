//! The boundary to the API server's write side: the PVC `/status` patch and Events.

use crate::claims::ClaimKey;
use std::future::Future;
use volhealth_model::VolumeHealthStatus;

/// What the API server stored after a 2xx patch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Patched {
    /// The claim's new resourceVersion.
    pub resource_version: Option<String>,
    /// `status.healthStatus` as the API server returned it (None when it dropped the field).
    pub health: Option<VolumeHealthStatus>,
}

/// Why a write failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The claim is gone.
    #[error("the claim no longer exists")]
    NotFound,
    /// The API server refused the content (4xx other than 404/429).
    #[error("rejected by the API server: {0}")]
    Rejected(String),
    /// The API server could not be reached or is overloaded (network error, 5xx, 429).
    #[error("API server unavailable: {0}")]
    Unavailable(String),
}

/// Kind of Event, as core/v1 spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl EventType {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An Event about one claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimEvent {
    /// The claim.
    pub key: ClaimKey,
    /// Its uid (involvedObject.uid).
    pub uid: String,
    /// Normal or Warning.
    pub event_type: EventType,
    /// CamelCase reason.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
}

/// Writes to the API server.
pub trait StatusWriter: Send + Sync + 'static {
    /// Merge-patches `status.healthStatus` of the claim to `health` (None = remove the field).
    fn patch_health(
        &self,
        key: &ClaimKey,
        health: Option<&VolumeHealthStatus>,
    ) -> impl Future<Output = Result<Patched, WriteError>> + Send;
    /// Creates an Event on the claim.
    fn event(&self, event: &ClaimEvent) -> impl Future<Output = Result<(), WriteError>> + Send;
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
