//! [`ClaimStore`] over reflector caches of PVs and PVCs (the only objects the monitor watches).

use crate::claims::{
    BoundClaim, ClaimKey, ClaimStore, StoredClaim, map_bound_claims, stored_claim,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use std::collections::BTreeMap;

/// Watches every PV and PVC and keeps them in memory.
#[derive(Clone)]
pub struct KubeClaims {
    pvs: Store<PersistentVolume>,
    pvcs: Store<PersistentVolumeClaim>,
    synced_rx: tokio::sync::watch::Receiver<Option<bool>>,
}

fn spawn_reflector<K>(api: Api<K>, what: &'static str) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .modify(|o: &mut K| o.meta_mut().managed_fields = None)
        .default_backoff();
    let mut stream = Box::pin(reflector::reflector(writer, stream));
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                tracing::warn!(resource = what, error = %e, "watch failed; retrying with backoff");
            }
        }
    });
    store
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
