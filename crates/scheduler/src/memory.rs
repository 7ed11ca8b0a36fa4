//! [`MemoryView`]: a [`ClusterView`] over plain maps, for tests and benchmarks.

use crate::matching::{ClaimVolume, ClusterView};
use crate::policy::HealthSchedulingPolicy;
use k8s_openapi::api::storage::v1::{
    CSINode, CSINodeStatus, StorageHealth, StorageHealthCondition,
};
use std::collections::HashMap;
use std::sync::Arc;

/// An in-memory cluster: policies by driver, claims by `namespace/name`, CSINodes by node.
#[derive(Debug, Default, Clone)]
pub struct MemoryView {
    /// Valid policies by driver name.
    pub policies: HashMap<String, Arc<HealthSchedulingPolicy>>,
    /// Bound claims by `namespace/name`.
    pub claims: HashMap<String, ClaimVolume>,
    /// CSINodes by node name.
    pub csinodes: HashMap<String, Arc<CSINode>>,
}

impl MemoryView {
    /// Sets `driver`'s policy.
    pub fn with_policy(mut self, driver: &str, policy: HealthSchedulingPolicy) -> Self {
        self.policies.insert(driver.to_string(), Arc::new(policy));
        self
    }

    /// Binds claim `namespace/name` to a volume of `driver` with these modes.
    pub fn with_claim(
        mut self,
        namespace: &str,
        name: &str,
        driver: &str,
        access_modes: &[&str],
        volume_mode: &str,
    ) -> Self {
        let claim = format!("{namespace}/{name}");
        self.claims.insert(
            claim.clone(),
            ClaimVolume {
                claim,
                driver: driver.to_string(),
                access_modes: access_modes.iter().map(|m| m.to_string()).collect(),
                volume_mode: volume_mode.to_string(),
            },
        );
        self
    }

    /// Gives `node` a CSINode whose `driver` entry holds one condition, for every access and
    /// volume mode.
    pub fn with_condition(self, node: &str, driver: &str, status: &str, reason: &str) -> Self {
        self.with_conditions(node, driver, vec![condition(status, reason, None, None)])
    }

    /// Gives `node` a CSINode whose `driver` entry holds `conditions`.
    pub fn with_conditions(
        mut self,
        node: &str,
        driver: &str,
        conditions: Vec<StorageHealthCondition>,
    ) -> Self {
        let mut csinode = CSINode::default();
        csinode.metadata.name = Some(node.to_string());
        csinode.status = Some(CSINodeStatus {
            storage_health: Some(vec![StorageHealth {
                name: driver.to_string(),
                health_conditions: Some(conditions),
            }]),
        });
        self.csinodes.insert(node.to_string(), Arc::new(csinode));
        self
    }
}

/// A condition with a status, a reason, and optional access and volume mode scoping.
pub fn condition(
    status: &str,
    reason: &str,
    access_mode: Option<&str>,
    volume_mode: Option<&str>,
) -> StorageHealthCondition {
    StorageHealthCondition {
        status: status.to_string(),
        reason: reason.to_string(),
        access_mode: access_mode.map(str::to_string),
        volume_mode: volume_mode.map(str::to_string),
        ..Default::default()
    }
}

impl ClusterView for MemoryView {
    fn policy(&self, driver: &str) -> Option<Arc<HealthSchedulingPolicy>> {
        self.policies.get(driver).cloned()
    }

    fn claim_volume(&self, namespace: &str, name: &str) -> Option<ClaimVolume> {
        self.claims.get(&format!("{namespace}/{name}")).cloned()
    }

    fn csinode(&self, node: &str) -> Option<Arc<CSINode>> {
        self.csinodes.get(node).cloned()
    }
}
