//! Whether the API server stores the health fields at all. With its `CSIVolumeHealth` feature gate
//! off (every managed cluster while the feature is alpha) it accepts writes of
//! `pvc.status.healthStatus`, `pod.status.volumeHealth` and `csinode.status.storageHealth` and
//! drops the fields, so "no conditions" would read as healthy when nothing can be shown. When
//! there is nothing to show, `status` asks with a dry-run write (`dryRun=All`: nothing is
//! stored) of a condition on one object in scope and looks at what comes back.

use crate::findings::Snapshot;
use crate::kubeconfig::Connection;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;

/// What the dry run showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// The field came back: the server stores health (or nothing in scope could be asked).
    Stored,
    /// The field was dropped from `object` (`pvc/NS/NAME`…): the gate is off.
    Dropped {
        /// The object the dry run wrote.
        object: String,
    },
    /// The dry run could not be made (e.g. the identity may not patch status); why.
    Unknown(String),
}

/// The condition the dry run writes: valid by the KEP's rules, and never stored.
fn probe_condition(status: &str) -> serde_json::Value {
    json!({"status": status, "reason": "VolhealthStorageCheck", "message": "dry run by volhealth status; not stored"})
}

/// Asks the API server, through a dry-run write on one object of `snapshot`, whether it keeps
/// the health fields.
pub async fn check(conn: &Connection, snapshot: &Snapshot) -> Gate {
    let target = if let Some(pvc) = snapshot.pvcs.first() {
        Target {
            resource: ApiResource::erase::<PersistentVolumeClaim>(&()),
            short: "pvc",
            meta: &pvc.metadata,
            field: "healthStatus",
            value: json!({"healthConditions": [probe_condition("Degraded")]}),
        }
    } else if let Some((pod, volume)) = snapshot.pods.iter().find_map(|p| {
        let v = p.spec.as_ref()?.volumes.as_ref()?.first()?.name.clone();
        Some((p, v))
    }) {
        Target::entry::<Pod>("pod", &pod.metadata, "volumeHealth", volume, "Degraded")
    } else if let Some((node, driver)) = snapshot.csinodes.iter().find_map(|n| {
        let d = n.spec.drivers.first()?.name.clone();
        Some((n, d))
    }) {
        Target::entry::<CSINode>(
            "csinode",
            &node.metadata,
            "storageHealth",
            driver,
            "StorageDegraded",
        )
    } else {
        return Gate::Stored;
    };
    let object = target.object();
    match target.dry_run(conn.client.clone()).await {
        Ok(true) => Gate::Stored,
        Ok(false) => Gate::Dropped { object },
        Err(kube::Error::Api(s)) => Gate::Unknown(format!("{} ({})", s.message, s.code)),
        Err(e) => Gate::Unknown(crate::kubeconfig::root_cause(&e)),
    }
}

/// The object the dry run writes, and the status field it writes there.
struct Target<'a> {
    /// Its kind.
    resource: ApiResource,
    /// Its kind as the table shortens it (`pvc`, `pod`, `csinode`).
    short: &'static str,
    /// Its name and namespace.
    meta: &'a ObjectMeta,
    /// The health field of its `status`.
    field: &'static str,
    /// What the dry run writes into the field.
    value: serde_json::Value,
}

impl<'a> Target<'a> {
    /// The health list `field` of the `K` of `meta` (`short` in the table), written with one
    /// entry, `name`, holding a probe condition of `status`.
    fn entry<K: kube::Resource<DynamicType = ()>>(
        short: &'static str,
        meta: &'a ObjectMeta,
        field: &'static str,
        name: String,
        status: &str,
    ) -> Self {
        Target {
            resource: ApiResource::erase::<K>(&()),
            short,
            meta,
            field,
            value: json!([{"name": name, "healthConditions": [probe_condition(status)]}]),
        }
    }

    /// `short/NAMESPACE/NAME`, or `short/NAME` for a cluster-scoped object.
    fn object(&self) -> String {
        let name = self.meta.name.as_deref().unwrap_or_default();
        match &self.meta.namespace {
            Some(ns) => format!("{}/{ns}/{name}", self.short),
            None => format!("{}/{name}", self.short),
        }
    }

    /// Writes the field with a status merge patch as a dry run; whether the answer kept it.
    async fn dry_run(self, client: kube::Client) -> kube::Result<bool> {
        let api: Api<DynamicObject> = match &self.meta.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &self.resource),
            None => Api::all_with(client, &self.resource),
        };
        let dry = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        let patch = json!({"status": {self.field: self.value}});
        let name = self.meta.name.as_deref().unwrap_or_default();
        let answer = api.patch_status(name, &dry, &Patch::Merge(patch)).await?;
        Ok(answer
            .data
            .get("status")
            .and_then(|s| s.get(self.field))
            .is_some_and(|v| !v.is_null()))
    }
}

/// What the table says instead of "no conditions" when the gate is off.
pub fn dropped_message(object: &str) -> String {
    format!(
        "The API server does not store volume health: a dry-run write of a health condition on {object} came back without it, so its CSIVolumeHealth feature gate is off.\nNothing the monitor, the agent or the kubelet reports can show up here: this is not \"healthy\". Turn the gate on (--feature-gates=CSIVolumeHealth=true on the API server).\n"
    )
}
