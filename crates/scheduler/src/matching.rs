//! The KEP's "Matching logic": for each of a pod's claims bound to a PV of a driver with a policy,
//! a node is filtered out when one of its storage conditions for that driver has a rule's status,
//! the rule's accessModes (if set) overlap the claim's, the rule's volumeMode (if set) equals the
//! claim's, and the condition's own accessMode / volumeMode scoping covers the claim.

use crate::policy::{HealthSchedulingPolicy, HealthSchedulingRule};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::{CSINode, StorageHealthCondition};
use std::sync::Arc;
use volhealth_kube_access::objects::pod_volumes;

/// The volume behind a bound claim, as the filter needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimVolume {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The CSI driver of its PV.
    pub driver: String,
    /// The PV's access modes.
    pub access_modes: Vec<String>,
    /// The PV's volume mode (`Filesystem` when unset, as the API defaults it).
    pub volume_mode: String,
}

/// What the filter reads of the cluster (the informer caches, or a fake in tests).
pub trait ClusterView {
    /// The valid policy of `driver`, if it has one.
    fn policy(&self, driver: &str) -> Option<Arc<HealthSchedulingPolicy>>;
    /// The CSI volume bound to claim `namespace/name`, if it is bound to one.
    fn claim_volume(&self, namespace: &str, name: &str) -> Option<ClaimVolume>;
    /// The CSINode of `node`, if there is one.
    fn csinode(&self, node: &str) -> Option<Arc<CSINode>>;
    /// Whether the view holds the cluster's state yet (an informer cache's initial list).
    fn is_synced(&self) -> bool {
        true
    }
}

/// A claim of the pod whose driver has a policy.
#[derive(Debug, Clone)]
pub struct PolicedClaim {
    /// The claim's volume.
    pub volume: ClaimVolume,
    /// Its driver's policy.
    pub policy: Arc<HealthSchedulingPolicy>,
}

/// Why a node was filtered out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The driver whose storage is unhealthy there.
    pub driver: String,
    /// The condition's status.
    pub status: String,
    /// The condition's reason.
    pub reason: String,
    /// The claim (`namespace/name`) it affects.
    pub claim: String,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CSIStorageHealth: driver {} reports {} ({}) on this node, which its health scheduling policy rejects for claim {}",
            self.driver, self.status, self.reason, self.claim
        )
    }
}

/// The claims of `pod` (persistentVolumeClaim and ephemeral volumes) bound to a driver with a policy.
pub fn policed_claims(pod: &Pod, view: &impl ClusterView) -> Vec<PolicedClaim> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let volumes = pod_volumes(pod);
    let mut out: Vec<PolicedClaim> = Vec::new();
    for v in volumes {
        let claim = if let Some(pvc) = &v.persistent_volume_claim {
            pvc.claim_name.clone()
        } else if v.ephemeral.is_some() {
            // The ephemeral volume controller names the claim it creates this way.
            format!("{pod_name}-{}", v.name)
        } else {
            continue;
        };
        let Some(volume) = view.claim_volume(namespace, &claim) else {
            continue;
        };
        let Some(policy) = view.policy(&volume.driver) else {
            continue;
        };
        if out.iter().all(|c| c.volume.claim != volume.claim) {
            out.push(PolicedClaim { volume, policy });
        }
    }
    out
}

/// Whether `rule` and `condition` together reject a node for `volume`.
pub fn matches(
    rule: &HealthSchedulingRule,
    condition: &StorageHealthCondition,
    volume: &ClaimVolume,
) -> bool {
    let has_mode = |m: &str| volume.access_modes.iter().any(|a| a == m);
    condition.status == rule.status
        && (rule.access_modes.is_empty() || rule.access_modes.iter().any(|m| has_mode(m)))
        && rule
            .volume_mode
            .as_ref()
            .is_none_or(|m| *m == volume.volume_mode)
        && condition.access_mode.as_deref().is_none_or(has_mode)
        && condition
            .volume_mode
            .as_ref()
            .is_none_or(|m| *m == volume.volume_mode)
}

/// The first reason `node` fails for `claims`, or None when it passes.
pub fn node_rejection(
    node: &str,
    claims: &[PolicedClaim],
    view: &impl ClusterView,
) -> Option<Rejection> {
    if claims.is_empty() {
        return None;
    }
    let csinode = view.csinode(node)?;
    let entries = csinode.status.as_ref()?.storage_health.as_deref()?;
    for claim in claims {
        let Some(entry) = entries.iter().find(|e| e.name == claim.volume.driver) else {
            continue;
        };
        for condition in entry.health_conditions.as_deref().unwrap_or_default() {
            if claim
                .policy
                .rules
                .iter()
                .any(|r| matches(r, condition, &claim.volume))
            {
                return Some(Rejection {
                    driver: claim.volume.driver.clone(),
                    status: condition.status.clone(),
                    reason: condition.reason.clone(),
                    claim: claim.volume.claim.clone(),
                });
            }
        }
    }
    None
}

/// The filter's answer over a set of nodes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The nodes that pass, in the order asked.
    pub passed: Vec<String>,
    /// The nodes filtered out, with why.
    pub failed: Vec<(String, Rejection)>,
}

/// Filters `nodes` for `pod`.
pub fn filter<'a>(
    pod: &Pod,
    nodes: impl IntoIterator<Item = &'a str>,
    view: &impl ClusterView,
) -> Verdict {
    let claims = policed_claims(pod, view);
    let mut verdict = Verdict::default();
    for node in nodes {
        match node_rejection(node, &claims, view) {
            Some(r) => verdict.failed.push((node.to_string(), r)),
            None => verdict.passed.push(node.to_string()),
        }
    }
    verdict
}
