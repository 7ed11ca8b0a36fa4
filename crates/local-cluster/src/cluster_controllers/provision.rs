//! external-provisioner's role and the PV controller's: a claim of a class this driver
//! provisions gets a volume (CreateVolume `pvc-<uid>`) and a PV for it; claim and PV are bound to
//! each other; when the claim is gone, a `Delete` PV's volume is deleted and so is the PV.

use super::backoff::Retries;
use super::{Config, Snapshot};
use crate::failure::Context as _;
use crate::failure::{Result, chain};
use crate::up::workload;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::time::Instant;
use volhealth_kube_access::objects::pod_claim_names;

/// The annotation naming the provisioner of a PV.
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// The annotation that makes a StorageClass the default one.
pub const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// The class of `pvc` when this driver is to provision it: no volume yet, not being deleted, and
/// its class (or, with no class named, the default class) has this driver as provisioner.
pub fn class_to_provision<'a>(
    pvc: &PersistentVolumeClaim,
    classes: &'a [StorageClass],
    driver: &str,
) -> Option<&'a StorageClass> {
    let spec = pvc.spec.as_ref()?;
    if spec.volume_name.as_deref().is_some_and(|v| !v.is_empty())
        || pvc.metadata.deletion_timestamp.is_some()
    {
        return None;
    }
    let class = match spec.storage_class_name.as_deref() {
        Some("") => return None,
        Some(name) => classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))?,
        None => classes.iter().find(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS))
                .is_some_and(|v| v == "true")
        })?,
    };
    (class.provisioner == driver).then_some(class)
}

/// Bytes of a quantity like `1Gi`, `500M` or `1073741824`.
pub fn quantity_bytes(q: &str) -> Option<i64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let factor: f64 = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let n: f64 = num.parse().ok()?;
    Some((n * factor).ceil() as i64)
}

fn uid(pvc: &PersistentVolumeClaim) -> &str {
    pvc.metadata.uid.as_deref().unwrap_or("")
}

fn requested(pvc: &PersistentVolumeClaim) -> (String, Vec<String>, bool) {
    let spec = pvc.spec.clone().unwrap_or_default();
    let storage = spec
        .resources
        .and_then(|r| r.requests)
        .and_then(|r| r.get("storage").map(|q| q.0.clone()))
        .unwrap_or_else(|| "1Gi".into());
    let modes = spec
        .access_modes
        .unwrap_or_else(|| vec!["ReadWriteOnce".into()]);
    let block = spec.volume_mode.as_deref() == Some("Block");
    (storage, modes, block)
}

/// The PV for `pvc`, provisioned by `driver` in `class` as volume `volume_id`.
pub fn pv_for(
    pvc: &PersistentVolumeClaim,
    class: &StorageClass,
    driver: &str,
    volume_id: &str,
) -> Value {
    let (storage, modes, block) = requested(pvc);
    let name = format!("pvc-{}", uid(pvc));
    json!({
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: driver}},
        "spec": {
            "accessModes": modes,
            "capacity": {"storage": storage},
            "persistentVolumeReclaimPolicy": class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
            "storageClassName": class.metadata.name,
            "volumeMode": if block { "Block" } else { "Filesystem" },
            "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                         "namespace": pvc.metadata.namespace, "name": pvc.metadata.name, "uid": uid(pvc)},
            "csi": {"driver": driver, "volumeHandle": volume_id, "fsType": if block { Value::Null } else { json!("ext4") }},
        }
    })
}

/// A Warning Event on `pvc`, as external-provisioner records a failure.
async fn warn(client: &kube::Client, pvc: &PersistentVolumeClaim, reason: &str, message: &str) {
    let ns = pvc.metadata.namespace.clone().unwrap_or_default();
    let name = pvc.metadata.name.clone().unwrap_or_default();
    let now = jiff::Timestamp::now().to_string();
    let event = json!({
        "metadata": {"name": format!("{name}.{:x}", rand::random::<u64>()), "namespace": ns},
        "involvedObject": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns,
                           "name": name, "uid": uid(pvc)},
        "reason": reason, "message": message, "type": "Warning", "count": 1,
        "firstTimestamp": now, "lastTimestamp": now,
        "source": {"component": "volhealth-provisioner"},
        "reportingComponent": "volhealth-provisioner",
    });
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &ns);
    let result = match serde_json::from_value(event) {
        Ok(e) => api.create(&PostParams::default(), &e).await.map(|_| ()),
        Err(e) => Err(kube::Error::SerdeError(e)),
    };
    if let Err(e) = result {
        tracing::warn!("recording event {reason} on claim {ns}/{name}: {e}");
    }
}

async fn provision_one(
    client: &kube::Client,
    cfg: &Config,
    pvc: &PersistentVolumeClaim,
    class: &StorageClass,
) -> Result<String> {
    let (storage, modes, block) = requested(pvc);
    let bytes = quantity_bytes(&storage)
        .with_context(|| format!("the requested storage {storage:?} is not a quantity"))?;
    let name = format!("pvc-{}", uid(pvc));
    let volume_id = workload::create_volume_with(
        &cfg.controller,
        &name,
        bytes,
        workload::capability(&modes, block),
    )
    .await?;
    let pv: PersistentVolume = serde_json::from_value(pv_for(pvc, class, &cfg.driver, &volume_id))
        .context("building the PersistentVolume")?;
    match Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await
    {
        Ok(_) => Ok(name),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(name),
        Err(e) => Err(e).with_context(|| format!("creating PersistentVolume {name}")),
    }
}

/// Provisions every claim that wants a volume and has no PV yet.
pub async fn provision(
    client: &kube::Client,
    cfg: &Config,
    snap: &Snapshot,
    retries: &mut Retries,
    now: Instant,
) {
    for pvc in &snap.claims {
        let Some(class) = class_to_provision(pvc, &snap.classes, &cfg.driver) else {
            continue;
        };
        let has_pv = snap
            .volumes
            .iter()
            .any(|pv| claim_uid(pv) == Some(uid(pvc)));
        let key = format!("provision/{}", uid(pvc));
        if has_pv || !retries.ready(&key, now) {
            continue;
        }
        let what = format!(
            "{}/{}",
            pvc.metadata.namespace.as_deref().unwrap_or(""),
            pvc.metadata.name.as_deref().unwrap_or("")
        );
        match provision_one(client, cfg, pvc, class).await {
            Ok(pv) => {
                retries.succeeded(&key);
                tracing::info!("provisioned {pv} for claim {what}");
            }
            Err(e) => {
                let delay = retries.failed(&key, now);
                let message = format!(
                    "failed to provision volume with StorageClass {:?}: {}",
                    class.metadata.name.as_deref().unwrap_or(""),
                    chain(&e)
                );
                tracing::warn!("claim {what}: {message}; retrying in {delay:?}");
                warn(client, pvc, "ProvisioningFailed", &message).await;
            }
        }
    }
}

fn claim_uid(pv: &PersistentVolume) -> Option<&str> {
    pv.spec.as_ref()?.claim_ref.as_ref()?.uid.as_deref()
}

fn claim_of<'a>(
    pv: &PersistentVolume,
    claims: &'a [PersistentVolumeClaim],
) -> Option<&'a PersistentVolumeClaim> {
    let r = pv.spec.as_ref()?.claim_ref.as_ref()?;
    claims.iter().find(|c| {
        c.metadata.namespace == r.namespace
            && c.metadata.name == r.name
            && (r.uid.is_none() || c.metadata.uid == r.uid)
    })
}

fn phase_of_pv(pv: &PersistentVolume) -> Option<&str> {
    pv.status.as_ref()?.phase.as_deref()
}

fn phase_of_claim(pvc: &PersistentVolumeClaim) -> Option<&str> {
    pvc.status.as_ref()?.phase.as_deref()
}

async fn bind_pair(
    client: &kube::Client,
    pv: &PersistentVolume,
    pvc: &PersistentVolumeClaim,
) -> Result<()> {
    let pv_name = pv.metadata.name.clone().unwrap_or_default();
    let ns = pvc.metadata.namespace.clone().unwrap_or_default();
    let claim = pvc.metadata.name.clone().unwrap_or_default();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PatchParams::default();
    let volume_name = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref());
    if volume_name.is_none_or(str::is_empty) {
        pvcs.patch(
            &claim,
            &pp,
            &Patch::Merge(json!({
            "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes",
                                         "pv.kubernetes.io/bound-by-controller": "yes"}},
            "spec": {"volumeName": pv_name}})),
        )
        .await
        .with_context(|| format!("binding claim {ns}/{claim} to {pv_name}"))?;
    }
    if phase_of_pv(pv) != Some("Bound") {
        pvs.patch_status(
            &pv_name,
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await
        .with_context(|| format!("marking PersistentVolume {pv_name} Bound"))?;
    }
    if phase_of_claim(pvc) != Some("Bound") {
        let spec = pv.spec.clone().unwrap_or_default();
        let status = json!({"status": {"phase": "Bound", "accessModes": spec.access_modes,
                                       "capacity": spec.capacity}});
        pvcs.patch_status(&claim, &pp, &Patch::Merge(status))
            .await
            .with_context(|| format!("marking claim {ns}/{claim} Bound"))?;
    }
    Ok(())
}

/// Binds every PV of this driver's making and its claim to each other.
pub async fn bind(client: &kube::Client, snap: &Snapshot) {
    for pv in &snap.volumes {
        let Some(pvc) = claim_of(pv, &snap.claims) else {
            continue;
        };
        let pv_name = pv.metadata.name.as_deref().unwrap_or("");
        let volume_name = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref());
        let claims_this = volume_name.is_none_or(|v| v.is_empty() || v == pv_name);
        let settled = volume_name == Some(pv_name)
            && phase_of_pv(pv) == Some("Bound")
            && phase_of_claim(pvc) == Some("Bound");
        if !claims_this || settled || pvc.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match bind_pair(client, pv, pvc).await {
            Ok(()) => tracing::info!("bound {pv_name} and its claim"),
            Err(e) => tracing::warn!("{}", chain(&e)),
        }
    }
}

/// Whether a pod still uses claim `ns/name`.
fn claim_in_use(snap: &Snapshot, ns: &str, name: &str) -> bool {
    snap.pods.iter().any(|p| {
        p.metadata.namespace.as_deref() == Some(ns) && pod_claim_names(p).any(|c| c == name)
    })
}

/// For each PV this driver provisioned whose claim is gone: with reclaim policy `Delete`,
/// DeleteVolume and delete the PV (once no pod uses the claim any more); otherwise mark it Released.
pub async fn reclaim(
    client: &kube::Client,
    cfg: &Config,
    snap: &Snapshot,
    retries: &mut Retries,
    now: Instant,
) {
    for pv in &snap.volumes {
        let ours = pv
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PROVISIONED_BY))
            .is_some_and(|d| *d == cfg.driver);
        let Some(spec) = pv.spec.as_ref() else {
            continue;
        };
        let Some(r) = spec.claim_ref.as_ref() else {
            continue;
        };
        if !ours || claim_of(pv, &snap.claims).is_some() {
            continue;
        }
        let ns = r.namespace.as_deref().unwrap_or("");
        let claim = r.name.as_deref().unwrap_or("");
        let name = pv.metadata.name.clone().unwrap_or_default();
        let key = format!("reclaim/{name}");
        if claim_in_use(snap, ns, claim) || !retries.ready(&key, now) {
            continue;
        }
        let pvs: Api<PersistentVolume> = Api::all(client.clone());
        let result = if spec.persistent_volume_reclaim_policy.as_deref() == Some("Delete") {
            let handle = spec
                .csi
                .as_ref()
                .map(|c| c.volume_handle.clone())
                .unwrap_or_default();
            async {
                workload::delete_volume(&cfg.controller, &handle).await?;
                match pvs.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    Err(e) => Err(e).with_context(|| format!("deleting PersistentVolume {name}")),
                }
            }
            .await
            .map(|()| format!("deleted volume {handle} and {name}: its claim {ns}/{claim} is gone"))
        } else if phase_of_pv(pv) != Some("Released") {
            pvs.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Released"}})),
            )
            .await
            .map(|_| format!("released {name}: its claim {ns}/{claim} is gone"))
            .with_context(|| format!("marking PersistentVolume {name} Released"))
        } else {
            continue;
        };
        match result {
            Ok(done) => {
                retries.succeeded(&key);
                tracing::info!("{done}");
            }
            Err(e) => {
                let delay = retries.failed(&key, now);
                tracing::warn!("reclaiming {name}: {}; retrying in {delay:?}", chain(&e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, provisioner: &str, default: bool) -> StorageClass {
        let mut v = json!({"metadata": {"name": name}, "provisioner": provisioner});
        if default {
            v["metadata"]["annotations"] = json!({DEFAULT_CLASS: "true"});
        }
        serde_json::from_value(v).unwrap()
    }

    fn claim(spec: Value) -> PersistentVolumeClaim {
        serde_json::from_value(
            json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u1"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn only_claims_of_this_drivers_classes_without_a_volume_are_provisioned() {
        let classes = [class("ours", "d", false), class("theirs", "other", true)];
        let named = claim(json!({"storageClassName": "ours"}));
        assert!(class_to_provision(&named, &classes, "d").is_some());
        assert!(class_to_provision(&named, &classes, "other").is_none());
        let bound = claim(json!({"storageClassName": "ours", "volumeName": "pv"}));
        assert!(class_to_provision(&bound, &classes, "d").is_none());
        let no_class = claim(json!({"storageClassName": ""}));
        assert!(class_to_provision(&no_class, &classes, "d").is_none());
        let unknown = claim(json!({"storageClassName": "missing"}));
        assert!(class_to_provision(&unknown, &classes, "d").is_none());
        // No class named: the default class decides.
        let default = claim(json!({}));
        assert!(class_to_provision(&default, &classes, "d").is_none());
        assert_eq!(
            class_to_provision(&default, &classes, "other")
                .and_then(|c| c.metadata.name.as_deref()),
            Some("theirs")
        );
    }

    #[test]
    fn quantities_in_bytes() {
        assert_eq!(quantity_bytes("1Gi"), Some(1 << 30));
        assert_eq!(quantity_bytes("500M"), Some(500_000_000));
        assert_eq!(quantity_bytes("1.5Ki"), Some(1536));
        assert_eq!(quantity_bytes("42"), Some(42));
        assert_eq!(quantity_bytes("1Xi"), None);
        assert_eq!(quantity_bytes("Gi"), None);
    }

    #[test]
    fn the_pv_names_its_claim_driver_and_class_policy() {
        let mut c = class("ours", "d", false);
        c.reclaim_policy = Some("Retain".into());
        let pvc = claim(
            json!({"storageClassName": "ours", "accessModes": ["ReadWriteOncePod"],
            "resources": {"requests": {"storage": "2Gi"}}}),
        );
        let pv = pv_for(&pvc, &c, "d", "vol-7");
        assert_eq!(pv["metadata"]["name"], "pvc-u1");
        assert_eq!(pv["metadata"]["annotations"][PROVISIONED_BY], "d");
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["capacity"]["storage"], "2Gi");
        assert_eq!(pv["spec"]["accessModes"], json!(["ReadWriteOncePod"]));
        assert_eq!(pv["spec"]["claimRef"]["uid"], "u1");
        assert_eq!(pv["spec"]["claimRef"]["namespace"], "ns");
        assert_eq!(pv["spec"]["csi"]["volumeHandle"], "vol-7");
        let typed: PersistentVolume = serde_json::from_value(pv).unwrap();
        assert_eq!(claim_uid(&typed), Some("u1"));
    }
}
