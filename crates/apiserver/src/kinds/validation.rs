//! Validation on save: the object must decode as its v1.37 type, names must be valid, and the
//! KEP-1432 fields must follow the KEP's limits. Failures are 422 Invalid with field paths.

use crate::errors::{ApiError, Cause};
use crate::kinds::names::{self, NameRule};
use crate::kinds::quantity;
use crate::registry::{Printer, ResourceDef};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;
use serde_json::Value;
use std::collections::HashSet;

/// Most conditions one list may hold.
pub const MAX_CONDITIONS: usize = 16;
/// Longest reason, in bytes.
pub const MAX_REASON: usize = 256;
/// Longest message, in bytes.
pub const MAX_MESSAGE: usize = 1024;
const VOLUME_STATUSES: &[&str] = &["DataLoss", "Degraded", "Inaccessible"];
const STORAGE_STATUSES: &[&str] = &["StorageDegraded", "StorageUnreachable"];
const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];

fn decode<T: serde::de::DeserializeOwned>(obj: &Value, kind: &str) -> Result<T, ApiError> {
    serde_json::from_value::<T>(obj.clone())
        .map_err(|e| ApiError::bad_request(format!("error decoding {kind}: {e}")))
}

fn supported(vals: &[&str]) -> String {
    vals.iter()
        .map(|v| format!("\"{v}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Validates an object about to be stored.
pub fn validate(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let name = names::name_of(obj);
    let mut causes = Vec::new();
    if name.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    } else {
        let rule = match def.printer {
            // Events are DNS subdomains in kube-apiserver (core and events.k8s.io alike); only
            // the RBAC names are mere path segments.
            Printer::Role | Printer::RoleBinding => NameRule::PathSegment,
            Printer::Namespace => NameRule::Label,
            _ => NameRule::Subdomain,
        };
        names::check_name(name, rule, &mut causes);
    }
    if let Some(meta) = obj.get("metadata") {
        names::check_labels_and_annotations(meta, &mut causes);
    }
    quantity::check(def.printer, obj, &mut causes);
    match def.printer {
        Printer::Pvc => {
            let pvc: core::PersistentVolumeClaim = decode(obj, def.kind)?;
            if let Some(hs) = pvc.status.as_ref().and_then(|s| s.health_status.as_ref()) {
                volume_conditions(
                    hs.health_conditions.as_deref().unwrap_or(&[]),
                    "status.healthStatus.healthConditions",
                    &mut causes,
                );
            }
        }
        Printer::Pod => {
            let pod: core::Pod = decode(obj, def.kind)?;
            if pod.spec.is_none() {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    "spec.containers",
                    "Required value",
                ));
            }
            let volumes: HashSet<String> = pod
                .spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .map(|v| v.iter().map(|v| v.name.clone()).collect())
                .unwrap_or_default();
            let entries = pod
                .status
                .as_ref()
                .and_then(|s| s.volume_health.as_deref())
                .unwrap_or(&[]);
            named_entries(
                "status.volumeHealth",
                entries,
                |e| (&e.name, volumes.contains(&e.name)),
                |e, path, causes| {
                    volume_conditions(e.health_conditions.as_deref().unwrap_or(&[]), path, causes)
                },
                &mut causes,
            );
        }
        Printer::CsiNode => {
            let node: storage::CSINode = decode(obj, def.kind)?;
            let drivers: HashSet<&str> =
                node.spec.drivers.iter().map(|d| d.name.as_str()).collect();
            let entries = node
                .status
                .as_ref()
                .and_then(|s| s.storage_health.as_deref())
                .unwrap_or(&[]);
            named_entries(
                "status.storageHealth",
                entries,
                |e| (&e.name, drivers.contains(e.name.as_str())),
                |e, path, causes| {
                    storage_conditions(e.health_conditions.as_deref().unwrap_or(&[]), path, causes)
                },
                &mut causes,
            );
        }
        Printer::Namespace => drop(decode::<core::Namespace>(obj, def.kind)?),
        Printer::Node => drop(decode::<core::Node>(obj, def.kind)?),
        Printer::Pv => drop(decode::<core::PersistentVolume>(obj, def.kind)?),
        Printer::Event => drop(decode::<core::Event>(obj, def.kind)?),
        Printer::EventV1 => drop(decode::<k8s_openapi::api::events::v1::Event>(
            obj, def.kind,
        )?),
        Printer::CsiDriver => drop(decode::<storage::CSIDriver>(obj, def.kind)?),
        Printer::StorageClass => drop(decode::<storage::StorageClass>(obj, def.kind)?),
        Printer::VolumeAttachment => drop(decode::<storage::VolumeAttachment>(obj, def.kind)?),
        Printer::Lease => drop(decode::<k8s_openapi::api::coordination::v1::Lease>(
            obj, def.kind,
        )?),
        Printer::Secret => {
            crate::kinds::secrets::validate(&decode::<core::Secret>(obj, def.kind)?, &mut causes)
        }
        Printer::ServiceAccount => drop(decode::<core::ServiceAccount>(obj, def.kind)?),
        Printer::Pdb => drop(decode::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(
            obj, def.kind,
        )?),
        Printer::Role | Printer::RoleBinding => {
            crate::kinds::rbac_objects::check(obj, def, &mut causes)?
        }
        Printer::Review => {}
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(def.group, def.kind, name, causes))
    }
}

/// Checks the status a create carries, before the create drops it (CSINodes and
/// VolumeAttachments start without one): kube-apiserver decodes the whole body first, so a
/// status of the wrong type is refused (400), and a CSINode's storage health entries must each
/// name their driver (422), rather than the mistake vanishing with the status.
pub fn check_create_status(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    match obj.get("status") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(_)) => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "status: Invalid value: {other}: must be an object"
            )));
        }
    }
    if def.printer != Printer::CsiNode {
        return Ok(());
    }
    let entries = match obj.pointer("/status/storageHealth") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => &a[..],
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "status.storageHealth: Invalid value: {other}: must be a list"
            )));
        }
    };
    let mut causes = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let named = e
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if !named {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("status.storageHealth[{i}].name"),
                "Required value",
            ));
        }
    }
    if !causes.is_empty() {
        let name = names::name_of(obj);
        return Err(ApiError::invalid(def.group, def.kind, name, causes));
    }
    // Anything else of the wrong type fails decoding, as in kube-apiserver.
    drop(decode::<storage::CSINode>(obj, def.kind)?);
    Ok(())
}

fn common(
    path: &str,
    status: &str,
    reason: &str,
    message: Option<&str>,
    allowed: &[&str],
    causes: &mut Vec<Cause>,
) {
    if status.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            format!("{path}.status"),
            "Required value",
        ));
    } else {
        one_of(Some(status), allowed, &format!("{path}.status"), causes);
    }
    if reason.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            format!("{path}.reason"),
            "Required value",
        ));
    } else if reason.len() > MAX_REASON {
        causes.push(Cause::new(
            "FieldValueTooLong",
            format!("{path}.reason"),
            format!("Too long: may not be more than {MAX_REASON} bytes"),
        ));
    }
    if message.is_some_and(|m| m.len() > MAX_MESSAGE) {
        causes.push(Cause::new(
            "FieldValueTooLong",
            format!("{path}.message"),
            format!("Too long: may not be more than {MAX_MESSAGE} bytes"),
        ));
    }
}

fn too_many(path: &str, n: usize, causes: &mut Vec<Cause>) {
    if n > MAX_CONDITIONS {
        causes.push(Cause::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {n}: must have at most {MAX_CONDITIONS} items"),
        ));
    }
}

/// Checks the `name` of a keyed health list entry: required, naming something that exists
/// (`known`), and unique in its list.
/// `value`, when set, must be one of `allowed` (at `field`).
fn one_of(value: Option<&str>, allowed: &[&str], field: &str, causes: &mut Vec<Cause>) {
    if let Some(v) = value.filter(|v| !allowed.contains(v)) {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            field,
            format!(
                "Unsupported value: \"{v}\": supported values: {}",
                supported(allowed)
            ),
        ));
    }
}

/// The named entries of `field` (`status.volumeHealth`): each entry's name (from `name`, with
/// whether the object knows it) is checked and must be unique, and `conditions` checks its
/// conditions at `FIELD[i].healthConditions`.
fn named_entries<E>(
    field: &str,
    entries: &[E],
    name: impl Fn(&E) -> (&str, bool),
    conditions: impl Fn(&E, &str, &mut Vec<Cause>),
    causes: &mut Vec<Cause>,
) {
    let mut seen = HashSet::new();
    for (i, e) in entries.iter().enumerate() {
        let path = format!("{field}[{i}]");
        let (entry, known) = name(e);
        entry_name(entry, known, &mut seen, &path, causes);
        conditions(e, &format!("{path}.healthConditions"), causes);
    }
}

fn entry_name(
    name: &str,
    known: bool,
    seen: &mut HashSet<String>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let field = format!("{path}.name");
    if name.is_empty() {
        causes.push(Cause::new("FieldValueRequired", field, "Required value"));
    } else if !known {
        causes.push(Cause::new(
            "FieldValueNotFound",
            field,
            format!("Not found: \"{name}\""),
        ));
    } else if !seen.insert(name.to_string()) {
        causes.push(Cause::new(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: \"{name}\""),
        ));
    }
}

/// Checks one volume condition list (`pvc.status.healthStatus.healthConditions` or one
/// `pod.status.volumeHealth[].healthConditions`) found at field path `path`: at most
/// [`MAX_CONDITIONS`], known statuses, reasons and messages within their limits, and no two
/// conditions with the same (status, reason). Returns every problem, empty when valid.
pub fn volume_condition_causes(list: &[core::VolumeHealthCondition], path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    volume_conditions(list, path, &mut causes);
    causes
}

/// Checks one `csinode.status.storageHealth[].healthConditions` list found at field path
/// `path`: the rules of [`volume_condition_causes`] with the storage statuses, known access and
/// volume modes, and no two conditions with the same (status, reason) whatever their modes (the
/// v1.37 list is atomic with one accessMode and one volumeMode per condition; the KEP keys a
/// driver's conditions by status and reason). Returns every problem, empty when valid.
pub fn storage_condition_causes(
    list: &[storage::StorageHealthCondition],
    path: &str,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    storage_conditions(list, path, &mut causes);
    causes
}

fn duplicate(path: String, status: &str, reason: &str) -> Cause {
    Cause::new(
        "FieldValueDuplicate",
        path,
        format!("Duplicate value: {{\"status\":\"{status}\",\"reason\":\"{reason}\"}}"),
    )
}

/// A condition list at `path`: not too long, each condition's status (one of `statuses`),
/// reason and message (from `fields`), then `extra` for what only its kind has, and no
/// (status, reason) twice.
fn conditions<C>(
    list: &[C],
    path: &str,
    statuses: &[&str],
    fields: impl for<'c> Fn(&'c C) -> (&'c str, &'c str, Option<&'c str>),
    extra: impl Fn(&C, &str, &mut Vec<Cause>),
    causes: &mut Vec<Cause>,
) {
    too_many(path, list.len(), causes);
    let mut seen = HashSet::new();
    for (i, c) in list.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let (status, reason, message) = fields(c);
        common(&p, status, reason, message, statuses, causes);
        extra(c, &p, causes);
        if !seen.insert((status, reason)) {
            causes.push(duplicate(p, status, reason));
        }
    }
}

fn volume_conditions(list: &[core::VolumeHealthCondition], path: &str, causes: &mut Vec<Cause>) {
    conditions(
        list,
        path,
        VOLUME_STATUSES,
        |c| (&c.status, &c.reason, c.message.as_deref()),
        |_, _, _| {},
        causes,
    );
}

fn storage_conditions(
    list: &[storage::StorageHealthCondition],
    path: &str,
    causes: &mut Vec<Cause>,
) {
    conditions(
        list,
        path,
        STORAGE_STATUSES,
        |c| (&c.status, &c.reason, c.message.as_deref()),
        |c, p, causes| {
            let (access, volume) = (c.access_mode.as_deref(), c.volume_mode.as_deref());
            one_of(access, ACCESS_MODES, &format!("{p}.accessMode"), causes);
            one_of(volume, VOLUME_MODES, &format!("{p}.volumeMode"), causes);
        },
        causes,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pvc_health_rules() {
        let def = crate::registry::find("", "v1", "persistentvolumeclaims").unwrap();
        let mut pvc = json!({"metadata": {"name": "d"}, "status": {"healthStatus": {"healthConditions": [
            {"status": "Inaccessible", "reason": "VolumeNotFound"}]}}});
        validate(def, &pvc).unwrap();
        pvc["status"]["healthStatus"]["healthConditions"] = json!([
            {"status": "Bogus", "reason": ""},
            {"status": "Degraded", "reason": "x", "message": "m".repeat(1025)},
            {"status": "Degraded", "reason": "x"}]);
        let e = validate(def, &pvc).unwrap_err();
        assert_eq!(e.code, 422);
        let fields: Vec<String> = e.details.unwrap()["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            fields,
            [
                "status.healthStatus.healthConditions[0].status",
                "status.healthStatus.healthConditions[0].reason",
                "status.healthStatus.healthConditions[1].message",
                "status.healthStatus.healthConditions[2]"
            ]
        );
    }

    #[test]
    fn storage_conditions_are_keyed_by_status_and_reason() {
        let csin = crate::registry::find("storage.k8s.io", "v1", "csinodes").unwrap();
        let mut n = json!({"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "d", "nodeID": "n"}]},
            "status": {"storageHealth": [{"name": "d", "healthConditions": [
                {"status": "StorageDegraded", "reason": "Slow", "accessMode": "ReadWriteOnce", "volumeMode": "Block"},
                {"status": "StorageUnreachable", "reason": "Slow", "accessMode": "ReadWriteOnce", "volumeMode": "Block"}]}]}});
        validate(csin, &n).unwrap();
        // Same (status, reason), different capability: still one condition twice.
        n["status"]["storageHealth"][0]["healthConditions"][1] = json!(
            {"status": "StorageDegraded", "reason": "Slow", "accessMode": "ReadWriteMany", "volumeMode": "Filesystem"});
        let e = validate(csin, &n).unwrap_err();
        assert_eq!(e.code, 422);
        let causes = e.details.unwrap()["causes"].clone();
        assert_eq!(
            causes,
            json!([{"reason": "FieldValueDuplicate",
                "field": "status.storageHealth[0].healthConditions[1]",
                "message": "Duplicate value: {\"status\":\"StorageDegraded\",\"reason\":\"Slow\"}"}])
        );
    }

    #[test]
    fn pod_and_csinode_names_must_exist() {
        let pods = crate::registry::find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [], "volumes": [{"name": "data"}]},
            "status": {"volumeHealth": [{"name": "other"}]}});
        let e = validate(pods, &pod).unwrap_err();
        assert!(
            e.message.contains("status.volumeHealth[0].name: Not found"),
            "{}",
            e.message
        );
        let csin = crate::registry::find("storage.k8s.io", "v1", "csinodes").unwrap();
        let n = json!({"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "d", "nodeID": "n"}]},
            "status": {"storageHealth": [{"name": "x", "healthConditions": []}]}});
        assert!(
            validate(csin, &n)
                .unwrap_err()
                .message
                .contains("status.storageHealth[0].name")
        );
    }
}
