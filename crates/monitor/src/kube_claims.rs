//! [`ClaimStore`] over compact watch caches of PVs and PVCs (the only objects the monitor
//! watches); see [`crate::watched`] for what is kept of them.

use crate::claims::{BoundClaim, ClaimKey, ClaimStore, StoredClaim};
use crate::watched::{
    PvRecord, PvcRecord, WatchedPv, WatchedPvc, is_released, map_bound_claims, pv_key, pv_record,
    pvc_key, pvc_record, still_names,
};
use kube::{Api, Client};
use std::collections::BTreeMap;
use volhealth_kube_access::compact_watch::{CompactStore, spawn_compact_watch};

/// Watches every PV and PVC and keeps a record of each in memory.
#[derive(Clone)]
pub struct KubeClaims {
    pvs: CompactStore<Box<str>, PvRecord>,
    pvcs: CompactStore<ClaimKey, PvcRecord>,
}

impl KubeClaims {
    /// Starts the two watches (they run until the runtime stops).
    pub fn start(client: Client) -> Self {
        let pvs = spawn_compact_watch(
            Api::<WatchedPv>::all(client.clone()),
            "persistentvolumes",
            pv_key,
            pv_record,
        );
        let pvcs = spawn_compact_watch(
            Api::<WatchedPvc>::all(client),
            "persistentvolumeclaims",
            pvc_key,
            pvc_record,
        );
        KubeClaims { pvs, pvcs }
    }

    /// Waits until both caches hold their initial lists (false if they never will).
    pub async fn wait_synced(&self) -> bool {
        self.pvs.wait_until_ready().await && self.pvcs.wait_until_ready().await
    }
}

impl ClaimStore for KubeClaims {
    fn bound_claims(&self, driver: &str) -> BTreeMap<String, BoundClaim> {
        let pvs = self.pvs.read();
        let pvcs = self.pvcs.read();
        map_bound_claims(driver, &pvs, &pvcs)
    }

    fn claim(&self, key: &ClaimKey) -> Option<StoredClaim> {
        self.pvcs.read().get(key).map(PvcRecord::stored)
    }

    fn released(&self, pv_name: &str, key: &ClaimKey, uid: &str) -> bool {
        let pvs = self.pvs.read();
        let pvcs = self.pvcs.read();
        is_released(pv_name, key, uid, &pvs, &pvcs)
    }

    fn still_names(&self, pv_name: &str, key: &ClaimKey, uid: &str) -> bool {
        still_names(pv_name, key, uid, &self.pvcs.read())
    }
}
