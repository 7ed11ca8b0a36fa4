//! The controller's view of the cluster: watch-fed caches of CSINodes, claims, volumes, pods and
//! nodes (no GET per tick), and the [`Finding`]s and pod sets the rules need from them.

use crate::findings::{Finding, of_csinode, of_pod, of_pvc};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use volhealth_kube_access::objects::{pod_claim_names, pod_volumes};
use volhealth_kube_access::watch::spawn_reflector;

/// The watched objects.
#[derive(Clone)]
pub struct Caches {
    /// CSINodes (storage health).
    pub csinodes: Store<CSINode>,
    /// Claims (controller-side health).
    pub pvcs: Store<PersistentVolumeClaim>,
    /// Volumes (a claim's driver).
    pub pvs: Store<PersistentVolume>,
    /// Pods (node-side health, a claim's users, namespace sizes).
    pub pods: Store<Pod>,
    /// Nodes (taints already set).
    pub nodes: Store<Node>,
}

impl Caches {
    /// Starts the watches.
    pub fn start(client: &kube::Client) -> Caches {
        Caches {
            csinodes: spawn_reflector(Api::all(client.clone()), "csinodes"),
            pvcs: spawn_reflector(Api::all(client.clone()), "persistentvolumeclaims"),
            pvs: spawn_reflector(Api::all(client.clone()), "persistentvolumes"),
            pods: spawn_reflector(Api::all(client.clone()), "pods"),
            nodes: spawn_reflector(Api::all(client.clone()), "nodes"),
        }
    }

    /// Waits until every cache has its first full list.
    pub async fn ready(&self) -> bool {
        self.csinodes.wait_until_ready().await.is_ok()
            && self.pvcs.wait_until_ready().await.is_ok()
            && self.pvs.wait_until_ready().await.is_ok()
            && self.pods.wait_until_ready().await.is_ok()
            && self.nodes.wait_until_ready().await.is_ok()
    }

    /// The CSI driver of the claim `namespace/name`, through its bound volume.
    pub fn claim_driver(&self, namespace: &str, name: &str) -> Option<String> {
        let pvc = self
            .pvcs
            .get(&reflector::ObjectRef::new(name).within(namespace))?;
        let volume = pvc.spec.as_ref()?.volume_name.clone()?;
        let pv = self.pvs.get(&reflector::ObjectRef::new(&volume))?;
        Some(pv.spec.as_ref()?.csi.as_ref()?.driver.clone())
    }

    /// Every condition on every watched object.
    pub fn findings(&self) -> Vec<Finding> {
        let mut out: Vec<Finding> = self
            .csinodes
            .state()
            .iter()
            .flat_map(|n| of_csinode(n))
            .collect();
        for pvc in self.pvcs.state() {
            let ns = pvc.metadata.namespace.clone().unwrap_or_default();
            let name = pvc.metadata.name.clone().unwrap_or_default();
            out.extend(of_pvc(&pvc, self.claim_driver(&ns, &name).as_deref()));
        }
        for pod in self.pods.state() {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let volumes = pod_volumes(&pod);
            out.extend(of_pod(&pod, |volume| {
                let v = volumes.iter().find(|v| v.name == volume)?;
                if let Some(csi) = &v.csi {
                    return Some(csi.driver.clone());
                }
                self.claim_driver(&ns, &v.persistent_volume_claim.as_ref()?.claim_name)
            }));
        }
        out
    }

    /// The pods (names) in `namespace` that use claim `claim`.
    pub fn pods_of_claim(&self, namespace: &str, claim: &str) -> Vec<String> {
        self.pods
            .state()
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| pod_claim_names(p).any(|c| c == claim))
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    }

    /// How many pods `namespace` has (the eviction budget's base).
    pub fn pods_in(&self, namespace: &str) -> usize {
        self.pods
            .state()
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .count()
    }

    /// The annotations of the object a finding is about, if it is cached.
    pub fn annotations_of(
        &self,
        f: &Finding,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        let ns = f.namespace.as_deref().unwrap_or_default();
        let meta = match f.kind {
            crate::ObjectKind::CSINode => self
                .csinodes
                .get(&reflector::ObjectRef::new(&f.name))?
                .metadata
                .clone(),
            crate::ObjectKind::PersistentVolumeClaim => self
                .pvcs
                .get(&reflector::ObjectRef::new(&f.name).within(ns))?
                .metadata
                .clone(),
            crate::ObjectKind::Pod => self
                .pods
                .get(&reflector::ObjectRef::new(&f.name).within(ns))?
                .metadata
                .clone(),
        };
        meta.annotations
    }
}
