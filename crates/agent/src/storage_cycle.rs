//! Per-driver backend health: NodeGetStorageHealth → csinode.status.storageHealth, keeping spec.drivers current.

use crate::agent::Agent;
use crate::drivers::Driver;
use crate::error::Result;
use crate::metrics::METHOD_STORAGE;
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;
use std::sync::Arc;
use volhealth_csi::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_kube_access::objects::storage_health;
use volhealth_writer::coverage::{self, NodeSources};
use volhealth_writer::{EntryReports, FailureKind, ObjectRef, ProbeError, Stored, timed};

const SPEC_KEY: &str = "csinodes";
/// The backoff key of the coverage annotation's writes (kept apart from spec.drivers').
const COVERAGE_KEY: &str = "csinodes coverage";

/// One of the agent's writes of its CSINode, as its failures are told.
struct CsiNodeWrite {
    /// Its key in the refusal backoff.
    key: &'static str,
    /// What the API server refused.
    what: &'static str,
    /// The write, as in "… failed".
    doing: &'static str,
    /// What a refusal means meanwhile ("" when nothing to add), ending in "; ".
    meanwhile: &'static str,
}

/// The write of the node's health sources annotation.
const SOURCES_WRITE: CsiNodeWrite = CsiNodeWrite {
    key: COVERAGE_KEY,
    what: "node health sources annotation",
    doing: "publishing the node health sources",
    meanwhile: "`volhealth status` shows this node's side as unknown; ",
};

/// The write of the node's `spec.drivers`.
const DRIVERS_WRITE: CsiNodeWrite = CsiNodeWrite {
    key: SPEC_KEY,
    what: "drivers update",
    doing: "updating the drivers",
    meanwhile: "",
};

/// The [`coverage::NODE_SOURCES`] value for the registered drivers.
pub fn coverage_value(drivers: &BTreeMap<String, Arc<Driver>>) -> String {
    let sources: BTreeMap<String, NodeSources> = drivers
        .iter()
        .map(|(name, d)| (name.clone(), d.coverage))
        .collect();
    coverage::node_value(&sources)
}

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
    /// Keeps spec.drivers listing every registered driver and probes the backends of the
    /// drivers `due` this cycle.
    pub(crate) async fn storage_cycle(
        &self,
        drivers: &BTreeMap<String, Arc<Driver>>,
        due: &BTreeMap<String, Arc<Driver>>,
    ) -> Result<()> {
        if due.is_empty() {
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
        let csinode = self.publish_coverage(csinode, drivers).await;
        let registered: Vec<String> = csinode
            .spec
            .drivers
            .iter()
            .map(|d| d.name.clone())
            .collect();

        let probed: Vec<&Arc<Driver>> = due.values().filter(|d| d.storage_health).collect();
        let answers = futures::future::join_all(probed.iter().map(|d| self.probe_storage(d))).await;

        let stored = Stored {
            uid: csinode.metadata.uid.clone(),
            resource_version: csinode.metadata.resource_version.clone(),
            value: storage_health(&csinode).to_vec(),
        };
        self.storage_offers.target().remember(&node, stored);
        let object = ObjectRef {
            api_version: "storage.k8s.io/v1",
            kind: "CSINode",
            namespace: None,
            name: node.clone(),
            uid: csinode.metadata.uid.clone(),
        };
        let mut reports = BTreeMap::new();
        for (driver, answer) in probed.iter().zip(answers) {
            let Some(entries) = answer else { continue };
            if !registered.contains(&driver.name) {
                continue;
            }
            let report = volhealth_model::storage_report(&entries);
            if !self.notes.is_quiet(&report) {
                self.notes.note(
                    &format!("csinode {node} driver {}", driver.name),
                    &object,
                    &format!("the storage backend of driver {}", driver.name),
                    &report,
                );
            }
            reports.insert(driver.name.clone(), report);
        }
        let reports = EntryReports {
            entries: reports,
            order: Vec::new(),
        };
        self.storage_offers.offer(node, reports);
        Ok(())
    }

    async fn probe_storage(&self, driver: &Driver) -> Option<Vec<StorageBackendHealth>> {
        let _permit = self.probes.acquire().await.ok()?;
        let call = async {
            driver
                .client
                .storage_health()
                .await
                .map_err(ProbeError::from)
        };
        let answer = timed(
            &self.deps.metrics.writer,
            &driver.name,
            METHOD_STORAGE,
            self.deps.timeout,
            call,
        )
        .await;
        self.failures
            .note(format_args!("{METHOD_STORAGE} {}", driver.name), &answer);
        answer.ok()
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
        let Some(current) = existing else {
            if !self.state().spec_backoff.allowed(&SPEC_KEY) {
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
                    annotations: Some(BTreeMap::from([(
                        coverage::NODE_SOURCES.to_string(),
                        coverage_value(drivers),
                    )])),
                    ..Default::default()
                },
                spec: CSINodeSpec { drivers: wanted },
                status: None,
            };
            let created = self.deps.cluster.create_csinode(&csinode).await;
            let created = self.spec_written("creating", &node, created)?;
            if created.is_some() {
                tracing::info!("created CSINode {node}");
            }
            return Ok(created);
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
        if !changed || !self.state().spec_backoff.allowed(&SPEC_KEY) {
            return Ok(Some(current));
        }
        let rv = current.metadata.resource_version.clone();
        let patched = self
            .deps
            .cluster
            .patch_csinode_drivers(&node, rv.as_deref(), &merged)
            .await;
        match self.spec_written("patching", &node, patched)? {
            Some(updated) => {
                self.state().spec_backoff.accepted(&SPEC_KEY);
                tracing::info!("updated the drivers of CSINode {node}");
                Ok(Some(updated))
            }
            None => Ok(Some(current)),
        }
    }

    /// Makes the CSINode's [`coverage::NODE_SOURCES`] annotation say what answers for each
    /// registered driver's volumes on this node, writing only when it says something else.
    async fn publish_coverage(
        &self,
        csinode: CSINode,
        drivers: &BTreeMap<String, Arc<Driver>>,
    ) -> CSINode {
        let node = self.deps.node_name.clone();
        let wanted = coverage_value(drivers);
        let current = csinode.metadata.annotations.as_ref();
        let Some(patch) =
            coverage::annotation_patch(current, &[(coverage::NODE_SOURCES, wanted.as_str())])
        else {
            return csinode;
        };
        if !self.state().spec_backoff.allowed(&COVERAGE_KEY) {
            return csinode;
        }
        match self
            .deps
            .cluster
            .patch_csinode_metadata(&node, &patch)
            .await
        {
            Ok(updated) => {
                self.deps.metrics.write(SPEC_KEY, "success");
                self.state().spec_backoff.accepted(&COVERAGE_KEY);
                tracing::info!(sources = %wanted, "published the node health sources on CSINode {node}");
                updated
            }
            Err(e) => {
                // Forbidden too is a refusal here: the annotation is optional, the agent goes on.
                self.csinode_write_failed(&SOURCES_WRITE, &node, &e, e.is_forbidden());
                csinode
            }
        }
    }

    /// Counts a write of the CSINode's spec (`doing`: creating or patching) and sorts out its
    /// answer: the CSINode written; the identity error when it was forbidden; or None when it
    /// failed otherwise (counted, and backed off when refused).
    fn spec_written(
        &self,
        doing: &str,
        node: &str,
        answer: std::result::Result<CSINode, crate::cluster::ApiFailure>,
    ) -> Result<Option<CSINode>> {
        match answer {
            Ok(written) => {
                self.deps.metrics.write(SPEC_KEY, "success");
                Ok(Some(written))
            }
            Err(e) if e.is_forbidden() => {
                self.deps.metrics.write(SPEC_KEY, "rejected");
                Err(self.identity_error(&format!("{doing} csinodes/{node}"), &e))
            }
            Err(e) => {
                self.spec_write_failed(node, &e);
                Ok(None)
            }
        }
    }

    fn spec_write_failed(&self, node: &str, e: &crate::cluster::ApiFailure) {
        self.csinode_write_failed(&DRIVERS_WRITE, node, e, false);
    }

    /// Counts a failed write of the CSINode and says so: a refusal (or `refused` anyway) once,
    /// then backed off under the write's key; any other failure each time, retried next cycle.
    fn csinode_write_failed(
        &self,
        write: &CsiNodeWrite,
        node: &str,
        e: &crate::cluster::ApiFailure,
        refused: bool,
    ) {
        let kind = e.kind();
        self.deps.metrics.write(SPEC_KEY, kind.result_label());
        if kind == FailureKind::Refused || refused {
            let (_, first) = self.state().spec_backoff.refused(&write.key);
            if first {
                tracing::warn!(
                    "CSINode {node}: the API server refused the {} ({e}); {}retrying slowly",
                    write.what,
                    write.meanwhile
                );
            }
        } else {
            tracing::warn!(
                "CSINode {node}: {} failed ({e}); retrying next cycle",
                write.doing
            );
        }
    }
}
