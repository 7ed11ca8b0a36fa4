//! Which claim a driver's volume belongs to: the boundary to the PV/PVC caches (the mapping
//! itself is in [`crate::watched`]).

use std::collections::BTreeMap;
use volhealth_model::VolumeHealthStatus;

/// A PVC's namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimKey {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A claim as currently stored in the API server (seen through the cache).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoredClaim {
    /// The claim's uid (for Events).
    pub uid: String,
    /// Its resourceVersion, to tell whether the cache has caught up with our own writes.
    pub resource_version: Option<String>,
    /// `status.healthStatus` as stored.
    pub health: Option<VolumeHealthStatus>,
    /// The storage system's own health annotation on the claim (vSphere's
    /// `volumehealth.storage.kubernetes.io/health`), when it has one.
    pub health_annotation: Option<String>,
}

/// A volume of our driver whose PV is bound to a Bound claim.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundClaim {
    /// The CSI volume id (`pv.spec.csi.volumeHandle`).
    pub volume_id: String,
    /// The PV's name.
    pub pv_name: String,
    /// The claim.
    pub key: ClaimKey,
    /// The claim as stored.
    pub stored: StoredClaim,
}

/// Read access to the PV/PVC caches.
pub trait ClaimStore: Send + Sync + 'static {
    /// Every volume of `driver` that is bound to a Bound claim, by volume id.
    fn bound_claims(&self, driver: &str) -> BTreeMap<String, BoundClaim>;
    /// One claim as stored, if it exists.
    fn claim(&self, key: &ClaimKey) -> Option<StoredClaim>;
    /// Whether the claim `key`, still the object `uid` and still naming the PV `pv_name`, has
    /// lost that PV (deleted, or being deleted), so the health it got from it is stale.
    fn released(&self, pv_name: &str, key: &ClaimKey, uid: &str) -> bool;
    /// Whether the claim `key` is still the object `uid` and still names the PV `pv_name`,
    /// bound or not (a claim can leave Bound before its PV is seen deleted).
    fn still_names(&self, pv_name: &str, key: &ClaimKey, uid: &str) -> bool;
}
