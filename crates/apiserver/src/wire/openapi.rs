//! `/openapi/v3`: the discovery document (group-version paths with a content hash) and one
//! OpenAPI v3 document per group-version, with a component schema for each served kind, enough
//! for `kubectl explain` down to the KEP-1432 health fields.

use crate::registry::{RESOURCES, ResourceDef};
use serde_json::{Map, Value, json};

/// The `/openapi/v3` path of a group-version: `api/v1` or `apis/{group}/{version}`.
fn gv_path(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        format!("api/{}", def.version)
    } else {
        format!("apis/{}/{}", def.group, def.version)
    }
}

/// FNV-1a of the document: the hash kubectl's cache keys the document by.
fn hash(doc: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in doc.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// The `/openapi/v3` discovery document.
pub fn discovery() -> Value {
    let mut paths = Map::new();
    for def in RESOURCES {
        let path = gv_path(def);
        if paths.contains_key(&path) {
            continue;
        }
        if let Some(doc) = group_version(&path) {
            let url = format!("/openapi/v3/{path}?hash={}", hash(&doc));
            paths.insert(path, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn object(description: &str, properties: Value, required: &[&str]) -> Value {
    let mut o = json!({"type": "object", "description": description, "properties": properties});
    if !required.is_empty() {
        o["required"] = json!(required);
    }
    o
}

fn list_of(description: &str, items: Value, key: &str) -> Value {
    json!({"type": "array", "description": description, "items": items,
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]})
}

fn time(description: &str) -> Value {
    json!({"type": "string", "format": "date-time", "description": description})
}

fn volume_health_condition() -> Value {
    object(
        "An adverse condition of a volume, as the CSI driver reported it.",
        json!({
            "status": string("The health category: \"Inaccessible\", \"DataLoss\" or \"Degraded\"."),
            "reason": string("A brief CamelCase reason; with status it identifies the condition."),
            "message": string("A human-readable description."),
        }),
        &["status", "reason"],
    )
}

fn volume_health_status() -> Value {
    object(
        "Health of the volume as the CSI controller plugin reports it (KEP-1432).",
        json!({
            "healthConditions": list_of("The adverse conditions; empty means healthy.", volume_health_condition(), "status"),
            "lastTransitionTime": time("When the current set of conditions first appeared."),
        }),
        &[],
    )
}

fn pod_volume_health() -> Value {
    object(
        "Health of one volume of the pod as the CSI node plugin on its node reports it.",
        json!({
            "name": string("The volume's name in pod.spec.volumes."),
            "healthConditions": list_of("The adverse conditions; empty means healthy.", volume_health_condition(), "status"),
            "lastTransitionTime": time("When the current set of conditions first appeared."),
        }),
        &["name"],
    )
}

fn storage_health() -> Value {
    let condition = object(
        "An adverse condition of a storage backend seen from the node.",
        json!({
            "status": string("The health category: \"StorageUnreachable\" or \"StorageDegraded\"."),
            "reason": string("A brief CamelCase reason."),
            "message": string("A human-readable description."),
            "accessMode": string("The access mode affected; unset means all."),
            "volumeMode": string("The volume mode affected; unset means both."),
            "lastTransitionTime": time("When this condition first appeared."),
        }),
        &["status", "reason"],
    );
    object(
        "Backend health reported by one CSI driver registered on the node.",
        json!({
            "name": string("The CSI driver's name, as in spec.drivers[].name."),
            "healthConditions": list_of("The adverse conditions; empty means healthy.", condition, "status"),
        }),
        &["name"],
    )
}

/// The status properties the server knows in detail, per kind.
fn status_of(def: &ResourceDef) -> Value {
    let (group, kind) = (def.group, def.kind);
    match (group, kind) {
        ("", "PersistentVolumeClaim") => object(
            "The observed state of the claim.",
            json!({
                "phase": string("The claim's phase: Pending, Bound or Lost."),
                "healthStatus": volume_health_status(),
            }),
            &[],
        ),
        ("", "Pod") => object(
            "The observed state of the pod.",
            json!({
                "phase": string("The pod's phase."),
                "volumeHealth": list_of("Node-reported health of each volume the pod uses.", pod_volume_health(), "name"),
            }),
            &[],
        ),
        ("storage.k8s.io", "CSINode") => object(
            "The observed state of the node's CSI drivers.",
            json!({
                "storageHealth": list_of("Backend health reports of the CSI drivers on the node.", storage_health(), "name"),
            }),
            &[],
        ),
        _ => object("The observed state of the object.", json!({}), &[]),
    }
}

fn kind_schema(def: &ResourceDef) -> Value {
    let mut properties = json!({
        "apiVersion": string("The versioned schema of this representation of an object."),
        "kind": string("The REST resource this object represents."),
        "metadata": object("Standard object metadata.", json!({
            "name": string("The object's name, unique within its namespace."),
            "namespace": string("The namespace of the object, when it has one."),
            "labels": {"type": "object", "description": "Labels to select objects by.", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "description": "Unstructured key-value data.", "additionalProperties": {"type": "string"}},
        }), &[]),
    });
    if def.has_status {
        properties["spec"] = object("The desired state of the object.", json!({}), &[]);
        properties["status"] = status_of(def);
    }
    let mut s = object(
        &format!("{} ({}).", def.kind, def.api_version()),
        properties,
        &[],
    );
    s["x-kubernetes-group-version-kind"] =
        json!([{"group": def.group, "kind": def.kind, "version": def.version}]);
    s
}

/// The schema name kubectl looks up: the Go package path of the kind, reversed domain first.
fn schema_name(def: &ResourceDef) -> String {
    let pkg = match def.group {
        "" => "core".to_string(),
        g => g.trim_end_matches(".k8s.io").replace('.', "_"),
    };
    format!("io.k8s.api.{pkg}.{}.{}", def.version, def.kind)
}

/// The OpenAPI v3 document of a group-version path (`api/v1`, `apis/storage.k8s.io/v1`).
pub fn group_version(path: &str) -> Option<Value> {
    let mut schemas = Map::new();
    let mut paths = Map::new();
    for def in RESOURCES.iter().filter(|d| gv_path(d) == path) {
        schemas.insert(schema_name(def), kind_schema(def));
        // kubectl explain finds the kind of a resource by its paths' operations.
        let gvk = json!({"group": def.group, "version": def.version, "kind": def.kind});
        let collection = if def.namespaced {
            format!("/{path}/namespaces/{{namespace}}/{}", def.plural)
        } else {
            format!("/{path}/{}", def.plural)
        };
        let op = |action: &str| {
            json!({"get": {"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema":
                    {"$ref": format!("#/components/schemas/{}", schema_name(def))}}}}}}})
        };
        paths.insert(format!("{collection}/{{name}}"), op("get"));
        paths.insert(collection, op("list"));
    }
    if schemas.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::wire::discovery::version()["gitVersion"].clone()},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_version_has_a_document_with_the_health_fields() {
        let d = discovery();
        let url = d["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/api/v1?hash="), "{url}");
        assert!(d["paths"]["apis/storage.k8s.io/v1"].is_object());
        let core = group_version("api/v1").unwrap();
        let pvc = &core["components"]["schemas"]["io.k8s.api.core.v1.PersistentVolumeClaim"];
        assert_eq!(
            pvc["x-kubernetes-group-version-kind"][0]["kind"],
            "PersistentVolumeClaim"
        );
        assert!(
            pvc.pointer("/properties/status/properties/healthStatus/properties/healthConditions")
                .is_some()
        );
        let storage = group_version("apis/storage.k8s.io/v1").unwrap();
        assert!(
            storage["components"]["schemas"]["io.k8s.api.storage.v1.CSINode"]
                .pointer("/properties/status/properties/storageHealth/items/properties/name")
                .is_some()
        );
        assert!(group_version("apis/nothing/v1").is_none());
    }
}
