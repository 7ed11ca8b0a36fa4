//! Per-driver backend health: NodeGetStorageHealth → csinode.status.storageHealth, keeping spec.drivers current.

use crate::agent::Agent;
use crate::drivers::Driver;
use crate::error::Result;
use crate::metrics::METHOD_STORAGE;
use k8s_openapi::api::storage::v1::{
    CSINode, CSINodeDriver, CSINodeSpec, StorageHealth, VolumeNodeResources,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;
use std::sync::Arc;
use volhealth_csi::v1::node_get_storage_health_response::StorageBackendHealth;

const STATUS_KEY: &str = "csinodes/status";
const SPEC_KEY: &str = "csinodes";

/// The CSINode spec.drivers entry the kubelet would write for a driver.
pub fn csinode_driver(driver: &Driver) -> CSINodeDriver {
    CSINodeDriver {
        name: driver.name.clone(),
        node_id: driver.node_id.clone(),
        topology_keys: (!driver.topology_keys.is_empty()).then(|| driver.topology_keys.clone()),
        allocatable: (driver.max_volumes_per_node > 0).then(|| VolumeNodeResources {
            count: i32::try_from(driver.max_volumes_per_node).ok(),
        }),
    }
}

impl Agent {
    pub(crate) async fn storage_cycle(
        &self,
        drivers: &BTreeMap<String, Arc<Driver>>,
    ) -> Result<()> {
        if drivers.is_empty() {
            return Ok(());
        }
        let node = self.deps.node_name.clone();
        let csinode = match self.deps.cluster.get_csinode(&node).await {
            Ok(c) => c,
            Err(e) if e.is_forbidden() => {
                return Err(self.identity_error(&format!("reading csinodes/{node}"), &e));
            }
            Err(e) => {
                tracing::warn!("reading CSINode {node}: {e}; retrying next cycle");
                return Ok(());
            }
        };
        let Some(csinode) = self.ensure_drivers(csinode, drivers).await? else {
            return Ok(());
        };
        let registered: Vec<String> = csinode
            .spec
            .drivers
            .iter()
            .map(|d| d.name.clone())
            .collect();

        let probed: Vec<&Arc<Driver>> = drivers.values().filter(|d| d.storage_health).collect();
        let answers = futures::future::join_all(probed.iter().map(|d| self.probe_storage(d))).await;

        let stored = csinode
            .status
            .as_ref()
            .and_then(|s| s.storage_health.clone())
            .unwrap_or_default();
        let mut list = stored;
        let now = self.deps.clock.now();
        let mut changed = false;
        for (driver, answer) in probed.iter().zip(answers) {
            let Some(entries) = answer else { continue };
            if !registered.contains(&driver.name) {
                continue;
            }
            let report = volhealth_model::storage_report(&entries);
            let object = format!("CSINode {node} driver {}", driver.name);
            for unknown in &report.unknown {
                self.deps.metrics.unknown_condition(unknown.raw_status);
                self.warn_once(format!("unknown {object} {} {}", unknown.raw_status, unknown.reason), || {
                    format!(
                        "{object}: unknown storage health status {} (reason {:?}); not treated as healthy",
                        unknown.raw_status, unknown.reason
                    )
                });
            }
            for fix in &report.fixes {
                self.warn_once(format!("fix {object} {fix}"), || format!("{object}: {fix}"));
            }
            let position = list.iter().position(|e| e.name == driver.name);
            if let Some(write) = volhealth_model::reconcile_storage(
                position.map(|i| &list[i]),
                &driver.name,
                &report,
                now,
            ) {
                write.apply_at(&mut list, position);
                changed = true;
            }
            let conditions: Vec<(String, String)> = list
                .iter()
                .find(|e| e.name == driver.name)
                .and_then(|e| e.health_conditions.as_ref())
                .map(|c| {
                    c.iter()
                        .map(|c| (c.status.clone(), c.reason.clone()))
                        .collect()
                })
                .unwrap_or_default();
            self.deps.metrics.set_storage(&driver.name, &conditions);
        }
        if changed {
            list.sort_by(|a, b| a.name.cmp(&b.name));
            self.write_storage(&node, list).await?;
        }
        Ok(())
    }

    async fn probe_storage(&self, driver: &Driver) -> Option<Vec<StorageBackendHealth>> {
        let _permit = self.probes.acquire().await.ok()?;
        let started = tokio::time::Instant::now();
        let answer = tokio::time::timeout(self.deps.timeout, driver.client.storage_health()).await;
        let ok = matches!(answer, Ok(Ok(_)));
        self.deps
            .metrics
            .probe(&driver.name, METHOD_STORAGE, ok, started.elapsed());
        match answer {
            Ok(Ok(entries)) => Some(entries),
            Ok(Err(status)) => {
                tracing::debug!(driver = %driver.name, "NodeGetStorageHealth failed, keeping the stored health: {}: {}", status.code(), status.message());
                None
            }
            Err(_) => {
                tracing::debug!(driver = %driver.name, "NodeGetStorageHealth timed out after {:?}, keeping the stored health", self.deps.timeout);
                None
            }
        }
    }

    /// Makes sure the CSINode exists and lists every registered driver, as the kubelet does, so that
    /// status entries for those drivers pass validation. Returns the CSINode to use, or None to skip this cycle.
    async fn ensure_drivers(
        &self,
        existing: Option<CSINode>,
        drivers: &BTreeMap<String, Arc<Driver>>,
    ) -> Result<Option<CSINode>> {
        let node = self.deps.node_name.clone();
        let wanted: Vec<CSINodeDriver> = drivers.values().map(|d| csinode_driver(d)).collect();
        let now = tokio::time::Instant::now();
        let Some(current) = existing else {
            if !self.state().backoff.allowed(SPEC_KEY, now) {
                return Ok(None);
            }
            let csinode = CSINode {
                metadata: ObjectMeta {
                    name: Some(node.clone()),
                    owner_references: self.deps.node_uid.clone().map(|uid| {
                        vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "Node".into(),
                            name: node.clone(),
                            uid,
                            ..Default::default()
                        }]
                    }),
                    ..Default::default()
                },
                spec: CSINodeSpec { drivers: wanted },
                status: None,
            };
            return match self.deps.cluster.create_csinode(&csinode).await {
                Ok(created) => {
                    self.deps.metrics.write(SPEC_KEY, "success");
                    tracing::info!("created CSINode {node}");
                    Ok(Some(created))
                }
                Err(e) if e.is_forbidden() => {
                    self.deps.metrics.write(SPEC_KEY, "rejected");
                    Err(self.identity_error(&format!("creating csinodes/{node}"), &e))
                }
                Err(e) => {
                    self.spec_write_failed(&node, &e);
                    Ok(None)
                }
            };
        };
        let mut merged = current.spec.drivers.clone();
        let mut changed = false;
        for w in wanted {
            match merged.iter_mut().find(|d| d.name == w.name) {
                Some(d) if d.node_id == w.node_id => {}
                Some(d) => {
                    *d = w;
                    changed = true;
                }
                None => {
                    merged.push(w);
                    changed = true;
                }
            }
        }
        if !changed || !self.state().backoff.allowed(SPEC_KEY, now) {
            return Ok(Some(current));
        }
        let rv = current.metadata.resource_version.clone();
        match self
            .deps
            .cluster
            .patch_csinode_drivers(&node, rv.as_deref(), &merged)
            .await
        {
            Ok(updated) => {
                self.deps.metrics.write(SPEC_KEY, "success");
                self.state().backoff.succeeded(SPEC_KEY);
                tracing::info!("updated the drivers of CSINode {node}");
                Ok(Some(updated))
            }
            Err(e) if e.is_forbidden() => {
                self.deps.metrics.write(SPEC_KEY, "rejected");
                Err(self.identity_error(&format!("patching csinodes/{node}"), &e))
            }
            Err(e) => {
                self.spec_write_failed(&node, &e);
                Ok(Some(current))
            }
        }
    }

    fn spec_write_failed(&self, node: &str, e: &crate::cluster::ApiFailure) {
        if e.is_rejected() {
            self.deps.metrics.write(SPEC_KEY, "rejected");
            if self
                .state()
                .backoff
                .failed(SPEC_KEY, tokio::time::Instant::now())
            {
                tracing::warn!(
                    "CSINode {node}: the API server refused the drivers update ({e}); retrying slowly"
                );
            }
        } else {
            self.deps.metrics.write(SPEC_KEY, "error");
            tracing::warn!(
                "CSINode {node}: updating the drivers failed ({e}); retrying next cycle"
            );
        }
    }

    async fn write_storage(&self, node: &str, list: Vec<StorageHealth>) -> Result<()> {
        if !self
            .state()
            .backoff
            .allowed(STATUS_KEY, tokio::time::Instant::now())
        {
            return Ok(());
        }
        match self
            .deps
            .cluster
            .patch_csinode_storage_health(node, &list)
            .await
        {
            Ok(returned) => {
                let got = returned
                    .status
                    .and_then(|s| s.storage_health)
                    .unwrap_or_default();
                if !list.is_empty() && got.is_empty() {
                    self.deps.metrics.write(STATUS_KEY, "dropped");
                    if self
                        .state()
                        .backoff
                        .failed(STATUS_KEY, tokio::time::Instant::now())
                    {
                        tracing::warn!(
                            "CSINode {node}: the API server accepted the write but did not store \
                             status.storageHealth (is the CSIVolumeHealth feature gate off there?); retrying slowly"
                        );
                    }
                    return Ok(());
                }
                self.deps.metrics.write(STATUS_KEY, "success");
                if self.state().backoff.succeeded(STATUS_KEY) {
                    tracing::info!("CSINode {node}: status write accepted again");
                }
                tracing::info!(drivers = list.len(), "wrote CSINode {node} storage health");
                Ok(())
            }
            Err(e) if e.is_forbidden() => {
                self.deps.metrics.write(STATUS_KEY, "rejected");
                Err(self.identity_error(&format!("patching csinodes/{node}/status"), &e))
            }
            Err(e) => {
                let rejected = e.is_rejected();
                self.deps
                    .metrics
                    .write(STATUS_KEY, if rejected { "rejected" } else { "error" });
                if rejected {
                    if self
                        .state()
                        .backoff
                        .failed(STATUS_KEY, tokio::time::Instant::now())
                    {
                        tracing::warn!(
                            "CSINode {node}: the API server refused the status write ({e}); retrying slowly"
                        );
                    }
                } else {
                    tracing::warn!(
                        "CSINode {node}: writing status failed ({e}); retrying next cycle"
                    );
                }
                Ok(())
            }
        }
    }
}
