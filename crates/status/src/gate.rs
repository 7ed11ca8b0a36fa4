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
use kube::api::{Api, Patch, PatchParams};
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
fn probe_condition() -> serde_json::Value {
    json!({"status": "Degraded", "reason": "VolhealthStorageCheck", "message": "dry run by volhealth status; not stored"})
}

/// Asks the API server, through a dry-run write on one object of `snapshot`, whether it keeps
/// the health fields.
pub async fn check(conn: &Connection, snapshot: &Snapshot) -> Gate {
    let client = conn.client.clone();
    let answer = if let Some(pvc) = snapshot.pvcs.first() {
        let ns = pvc.metadata.namespace.clone().unwrap_or_default();
        let patch = json!({"status": {"healthStatus": {"healthConditions": [probe_condition()]}}});
        dry_run(
            Api::<PersistentVolumeClaim>::namespaced(client, &ns),
            "pvc",
            &pvc.metadata,
            patch,
            |o| o.status.and_then(|s| s.health_status).is_some(),
        )
        .await
    } else if let Some((pod, volume)) = snapshot.pods.iter().find_map(|p| {
        let v = p.spec.as_ref()?.volumes.as_ref()?.first()?.name.clone();
        Some((p, v))
    }) {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let patch = json!({"status": {"volumeHealth": [{"name": volume, "healthConditions": [probe_condition()]}]}});
        dry_run(
            Api::<Pod>::namespaced(client, &ns),
            "pod",
            &pod.metadata,
            patch,
            |o| o.status.and_then(|s| s.volume_health).is_some(),
        )
        .await
    } else if let Some((node, driver)) = snapshot.csinodes.iter().find_map(|n| {
        let d = n.spec.drivers.first()?.name.clone();
        Some((n, d))
    }) {
        let patch = json!({"status": {"storageHealth": [{"name": driver, "healthConditions": [
            {"status": "StorageDegraded", "reason": "VolhealthStorageCheck", "message": "dry run by volhealth status; not stored"}]}]}});
        dry_run(
            Api::<CSINode>::all(client),
            "csinode",
            &node.metadata,
            patch,
            |o| o.status.and_then(|s| s.storage_health).is_some(),
        )
        .await
    } else {
        return Gate::Stored;
    };
    match answer {
        Ok((_, true)) => Gate::Stored,
        Ok((object, false)) => Gate::Dropped { object },
        Err(kube::Error::Api(s)) => Gate::Unknown(format!("{} ({})", s.message, s.code)),
        Err(e) => Gate::Unknown(crate::kubeconfig::root_cause(&e)),
    }
}

/// Writes the status merge `patch` on the `kind` object of `meta` through `api` as a dry run:
/// the object (`kind/NAMESPACE/NAME`, or `kind/NAME`), and whether the answer kept the health
/// field (`kept` looks).
async fn dry_run<K>(
    api: Api<K>,
    kind: &str,
    meta: &ObjectMeta,
    patch: serde_json::Value,
    kept: impl FnOnce(K) -> bool,
) -> kube::Result<(String, bool)>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = meta.name.clone().unwrap_or_default();
    let object = match &meta.namespace {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    };
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let answer = api.patch_status(&name, &dry, &Patch::Merge(patch)).await?;
    Ok((object, kept(answer)))
}

/// What the table says instead of "no conditions" when the gate is off.
pub fn dropped_message(object: &str) -> String {
    format!(
        "The API server does not store volume health: a dry-run write of a health condition on {object} came back without it, so its CSIVolumeHealth feature gate is off.\nNothing the monitor, the agent or the kubelet reports can show up here: this is not \"healthy\". Turn the gate on (--feature-gates=CSIVolumeHealth=true on the API server).\n"
    )
}
