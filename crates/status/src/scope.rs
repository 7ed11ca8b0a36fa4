//! Which PVCs and pods `status` reads, and reading them.

use crate::error::Result;
use crate::findings::Snapshot;
use crate::kubeconfig::{self, Connection};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use kube::api::{Api, ListParams};

/// Which PVCs and pods to read.
#[derive(Debug, Clone)]
pub struct Scope {
    /// `None` = every namespace.
    pub namespace: Option<String>,
    /// Label selector for PVCs and pods (`-l`).
    pub selector: Option<String>,
}

/// Objects asked for per list request: a cluster's tens of thousands of pods come in pages, as
/// kubectl reads them, not in one response the server must build whole.
pub const LIST_PAGE: u32 = 500;

/// Every object of `api` matching `lp`, read [`LIST_PAGE`] at a time.
async fn list_all<K>(api: &Api<K>, lp: &ListParams) -> kube::Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut items = Vec::new();
    let mut lp = lp.clone().limit(LIST_PAGE);
    loop {
        let page = api.list(&lp).await?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(items),
        }
    }
}

impl Scope {
    /// The API of the namespaced kind `K` in this scope.
    pub fn api<K>(&self, client: &kube::Client) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
}

/// Reads everything `status` shows, once.
pub async fn read(conn: &Connection, scope: &Scope) -> Result<Snapshot> {
    let lp = ListParams::default();
    let selected = match &scope.selector {
        Some(sel) => lp.clone().labels(sel),
        None => lp.clone(),
    };
    let where_ = scope
        .namespace
        .as_deref()
        .map(|n| format!(" in namespace {n}"))
        .unwrap_or_default();
    let (pvc_api, pod_api) = (
        scope.api::<PersistentVolumeClaim>(&conn.client),
        scope.api::<Pod>(&conn.client),
    );
    let csinode_api = Api::<CSINode>::all(conn.client.clone());
    let pv_api = Api::<PersistentVolume>::all(conn.client.clone());
    let csidriver_api = Api::<CSIDriver>::all(conn.client.clone());
    let (pvcs, pods, csinodes, pvs, csidrivers) = (
        list_all(&pvc_api, &selected),
        list_all(&pod_api, &selected),
        list_all(&csinode_api, &lp),
        list_all(&pv_api, &lp),
        list_all(&csidriver_api, &lp),
    );
    let (pvcs, pods, csinodes, pvs, csidrivers) =
        futures::join!(pvcs, pods, csinodes, pvs, csidrivers);
    let pvcs = pvcs.map_err(|e| {
        kubeconfig::explain(&e, &format!("listing PersistentVolumeClaims{where_}"), conn)
    })?;
    let pods = pods.map_err(|e| kubeconfig::explain(&e, &format!("listing Pods{where_}"), conn))?;
    let csinodes = csinodes.map_err(|e| kubeconfig::explain(&e, "listing CSINodes", conn))?;
    // PVs only name the driver of a volume; an identity that may not list them still gets the rest.
    let pvs = pvs.unwrap_or_default();
    // CSIDrivers only say what watches the controller side; without them it shows as unknown.
    let csidrivers = csidrivers.unwrap_or_default();
    Ok(Snapshot {
        pvcs,
        pods,
        csinodes,
        pvs,
        csidrivers,
    })
}
