//! The cells of one row for each kind.

use super::{access_modes, age, health, or_none, s};
use crate::registry::Printer;
use serde_json::{Value, json};

fn pod_cells(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let specs = o
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::len)
        .unwrap_or(0);
    let statuses = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready") == Some(&Value::Bool(true)))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum();
    let mut phase = s(o, "/status/phase");
    if !s(o, "/status/reason").is_empty() {
        phase = s(o, "/status/reason");
    }
    if o.pointer("/metadata/deletionTimestamp").is_some() {
        phase = "Terminating".into();
    }
    vec![
        json!(s(o, "/metadata/name")),
        json!(format!("{ready}/{specs}")),
        json!(phase),
        json!(restarts.to_string()),
        json!(health(o, Printer::Pod)),
        json!(age(o, "/metadata/creationTimestamp", now)),
        json!(or_none(s(o, "/status/podIP"))),
        json!(or_none(s(o, "/spec/nodeName"))),
        json!(or_none(s(o, "/status/nominatedNodeName"))),
        json!("<none>"),
    ]
}

fn node_cells(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let ready = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .map(|c| {
            if s(c, "/status") == "True" {
                "Ready"
            } else {
                "NotReady"
            }
        })
        .unwrap_or("Unknown");
    let mut status = ready.to_string();
    if o.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push_str(",SchedulingDisabled");
    }
    let roles: Vec<String> = o
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| {
                    k.strip_prefix("node-role.kubernetes.io/")
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    let addr = |ty: &str| {
        o.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| s(x, "/type") == ty))
            .map(|x| s(x, "/address"))
            .unwrap_or_else(|| "<none>".into())
    };
    vec![
        json!(s(o, "/metadata/name")),
        json!(status),
        json!(or_none(roles.join(","))),
        json!(age(o, "/metadata/creationTimestamp", now)),
        json!(s(o, "/status/nodeInfo/kubeletVersion")),
        json!(addr("InternalIP")),
        json!(addr("ExternalIP")),
        json!(or_none(s(o, "/status/nodeInfo/osImage"))),
        json!(or_none(s(o, "/status/nodeInfo/kernelVersion"))),
        json!(or_none(s(o, "/status/nodeInfo/containerRuntimeVersion"))),
    ]
}

fn event_cells(o: &Value, p: Printer, now: jiff::Timestamp) -> Vec<Value> {
    let (obj, last, first, count, source, note) = if p == Printer::Event {
        let last = [
            "/lastTimestamp",
            "/eventTime",
            "/firstTimestamp",
            "/metadata/creationTimestamp",
        ]
        .into_iter()
        .find(|ptr| !s(o, ptr).is_empty())
        .unwrap_or("/metadata/creationTimestamp");
        (
            "/involvedObject",
            last,
            "/firstTimestamp",
            s(o, "/count"),
            s(o, "/source/component"),
            s(o, "/message"),
        )
    } else {
        let last = [
            "/series/lastObservedTime",
            "/eventTime",
            "/deprecatedLastTimestamp",
            "/metadata/creationTimestamp",
        ]
        .into_iter()
        .find(|ptr| !s(o, ptr).is_empty())
        .unwrap_or("/metadata/creationTimestamp");
        (
            "/regarding",
            last,
            "/deprecatedFirstTimestamp",
            s(o, "/series/count"),
            s(o, "/reportingController"),
            s(o, "/note"),
        )
    };
    let kind = s(o, &format!("{obj}/kind")).to_ascii_lowercase();
    vec![
        json!(age(o, last, now)),
        json!(s(o, "/type")),
        json!(s(o, "/reason")),
        json!(format!("{kind}/{}", s(o, &format!("{obj}/name")))),
        json!(note),
        json!(source),
        json!(age(o, first, now)),
        json!(if count.is_empty() {
            "1".to_string()
        } else {
            count
        }),
        json!(s(o, "/metadata/name")),
    ]
}

/// The cells of one row.
pub fn cells(p: Printer, o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let name = json!(s(o, "/metadata/name"));
    let created = json!(age(o, "/metadata/creationTimestamp", now));
    match p {
        Printer::Namespace => vec![name, json!(s(o, "/status/phase")), created],
        Printer::Node => node_cells(o, now),
        Printer::Pod => pod_cells(o, now),
        Printer::Pvc => vec![
            name,
            json!(s(o, "/status/phase")),
            json!(s(o, "/spec/volumeName")),
            json!(s(o, "/status/capacity/storage")),
            json!(access_modes(
                o.pointer("/status/accessModes").unwrap_or(&Value::Null)
            )),
            json!(or_none(s(o, "/spec/storageClassName"))),
            json!(or_none(s(o, "/spec/volumeAttributesClassName"))),
            json!(health(o, Printer::Pvc)),
            created,
            json!(s(o, "/spec/volumeMode")),
        ],
        Printer::Pv => {
            let claim = if s(o, "/spec/claimRef/name").is_empty() {
                String::new()
            } else {
                format!(
                    "{}/{}",
                    s(o, "/spec/claimRef/namespace"),
                    s(o, "/spec/claimRef/name")
                )
            };
            vec![
                name,
                json!(s(o, "/spec/capacity/storage")),
                json!(access_modes(
                    o.pointer("/spec/accessModes").unwrap_or(&Value::Null)
                )),
                json!(s(o, "/spec/persistentVolumeReclaimPolicy")),
                json!(s(o, "/status/phase")),
                json!(claim),
                json!(s(o, "/spec/storageClassName")),
                json!(or_none(s(o, "/spec/volumeAttributesClassName"))),
                json!(s(o, "/status/reason")),
                created,
                json!(s(o, "/spec/volumeMode")),
            ]
        }
        Printer::Event | Printer::EventV1 => event_cells(o, p, now),
        Printer::CsiNode => vec![
            name,
            json!(
                o.pointer("/spec/drivers")
                    .and_then(Value::as_array)
                    .map(Vec::len)
                    .unwrap_or(0)
            ),
            json!(health(o, Printer::CsiNode)),
            created,
        ],
        Printer::CsiDriver => {
            let b = |ptr: &str, default: &str| {
                let v = s(o, ptr);
                if v.is_empty() { default.to_string() } else { v }
            };
            let tokens: Vec<String> = o
                .pointer("/spec/tokenRequests")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|t| s(t, "/audience")).collect())
                .unwrap_or_default();
            let modes = crate::wire::strings(o.pointer("/spec/volumeLifecycleModes"))
                .unwrap_or_else(|| vec!["Persistent".into()]);
            vec![
                name,
                json!(b("/spec/attachRequired", "true")),
                json!(b("/spec/podInfoOnMount", "false")),
                json!(b("/spec/storageCapacity", "false")),
                json!(or_none(tokens.join(","))),
                json!(b("/spec/requiresRepublish", "false")),
                json!(modes.join(",")),
                created,
            ]
        }
        Printer::StorageClass => {
            let mut n = s(o, "/metadata/name");
            if s(
                o,
                "/metadata/annotations/storageclass.kubernetes.io~1is-default-class",
            ) == "true"
            {
                n.push_str(" (default)");
            }
            let policy = s(o, "/reclaimPolicy");
            let mode = s(o, "/volumeBindingMode");
            vec![
                json!(n),
                json!(s(o, "/provisioner")),
                json!(if policy.is_empty() {
                    "Delete".into()
                } else {
                    policy
                }),
                json!(if mode.is_empty() {
                    "Immediate".into()
                } else {
                    mode
                }),
                json!(if s(o, "/allowVolumeExpansion").is_empty() {
                    "false".into()
                } else {
                    s(o, "/allowVolumeExpansion")
                }),
                created,
            ]
        }
        Printer::VolumeAttachment => vec![
            name,
            json!(s(o, "/spec/attacher")),
            json!(s(o, "/spec/source/persistentVolumeName")),
            json!(s(o, "/spec/nodeName")),
            json!(if s(o, "/status/attached").is_empty() {
                "false".into()
            } else {
                s(o, "/status/attached")
            }),
            created,
        ],
        Printer::Lease => vec![name, json!(s(o, "/spec/holderIdentity")), created],
        Printer::Pdb => vec![
            name,
            json!(s(o, "/spec/minAvailable")),
            json!(s(o, "/spec/maxUnavailable")),
            json!(s(o, "/status/disruptionsAllowed")),
            created,
        ],
        // The key count only: cells never carry secret data.
        Printer::Secret => vec![
            name,
            json!(s(o, "/type")),
            json!(
                o.get("data")
                    .and_then(Value::as_object)
                    .map_or(0, |d| d.len())
            ),
            created,
        ],
        Printer::ServiceAccount => vec![
            name,
            json!(
                o.get("secrets")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            ),
            created,
        ],
        Printer::Role => vec![name, json!(s(o, "/metadata/creationTimestamp"))],
        Printer::RoleBinding => binding_cells(o, name, created),
        Printer::Review => vec![name, created],
    }
}

/// A RoleBinding's or ClusterRoleBinding's cells: its role and its subjects by kind.
fn binding_cells(o: &Value, name: Value, created: Value) -> Vec<Value> {
    let subjects = o.get("subjects").and_then(Value::as_array);
    let of_kind = |kind: &str| -> String {
        subjects
            .into_iter()
            .flatten()
            .filter(|sub| s(sub, "/kind") == kind)
            .map(|sub| {
                let ns = s(sub, "/namespace");
                if kind == "ServiceAccount" {
                    format!("{ns}/{}", s(sub, "/name"))
                } else {
                    s(sub, "/name")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        name,
        json!(format!(
            "{}/{}",
            s(o, "/roleRef/kind"),
            s(o, "/roleRef/name")
        )),
        created,
        json!(of_kind("User")),
        json!(of_kind("Group")),
        json!(of_kind("ServiceAccount")),
    ]
}
