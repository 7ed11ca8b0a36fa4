//! [`ClaimStore`] over reflector caches of PVs and PVCs (the only objects the monitor watches).

use crate::claims::{
    BoundClaim, ClaimKey, ClaimStore, StoredClaim, map_bound_claims, stored_claim,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};
use std::collections::BTreeMap;
use volhealth_writer::kube_client::spawn_reflector;

/// Watches every PV and PVC and keeps them in memory.
#[derive(Clone)]
pub struct KubeClaims {
    pvs: Store<PersistentVolume>,
    pvcs: Store<PersistentVolumeClaim>,
    synced_rx: tokio::sync::watch::Receiver<Option<bool>>,
}

impl KubeClaims {
    /// Starts the two watches (they run until the runtime stops).
    pub fn start(client: Client) -> Self {
        let pvs = spawn_reflector(
            Api::<PersistentVolume>::all(client.clone()),
            "persistentvolumes",
        );
        let pvcs = spawn_reflector(
            Api::<PersistentVolumeClaim>::all(client),
            "persistentvolumeclaims",
        );
        let (tx, synced_rx) = tokio::sync::watch::channel(None);
        let (p, c) = (pvs.clone(), pvcs.clone());
        // The stores' readiness wakes only one waiter, so this task is the only one and tells the rest.
        tokio::spawn(async move {
            let ok = p.wait_until_ready().await.is_ok() && c.wait_until_ready().await.is_ok();
            tx.send_replace(Some(ok));
        });
        KubeClaims {
            pvs,
            pvcs,
            synced_rx,
        }
    }

    /// Waits until both caches hold their initial lists (false if they never will).
    pub async fn wait_synced(&self) -> bool {
        let mut rx = self.synced_rx.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.unwrap_or(false),
            Err(_) => false,
        }
    }
}

impl ClaimStore for KubeClaims {
    fn bound_claims(&self, driver: &str) -> BTreeMap<String, BoundClaim> {
        let pvs = self.pvs.state();
        let pvcs = self.pvcs.state();
        map_bound_claims(
            driver,
            pvs.iter().map(|p| p.as_ref()),
            pvcs.iter().map(|c| c.as_ref()),
        )
    }

    fn claim(&self, key: &ClaimKey) -> Option<StoredClaim> {
        let r = ObjectRef::<PersistentVolumeClaim>::new(&key.name).within(&key.namespace);
        self.pvcs.get(&r).map(|c| stored_claim(&c))
    }
}
