//! `as=Table` answers: the columns the real server prints for each kind, plus a HEALTH column for
//! PVCs, pods and CSINodes so `kubectl get` shows the KEP fields at a glance.

use crate::registry::Printer;
use serde_json::{Value, json};

/// What each row carries in `object` (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// A PartialObjectMetadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query value.
    pub fn parse(s: Option<&str>) -> IncludeObject {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

fn col(name: &str, ty: &str, priority: u8, description: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

fn s(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn or_none(x: String) -> String {
    if x.is_empty() { "<none>".into() } else { x }
}

/// Human age like kubectl's (`45s`, `3m20s`, `5h`, `2d3h`, `120d`, `3y40d`).
pub fn human_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        if secs % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", secs % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        format!("{}y{}d", d / 365, d % 365)
    } else {
        format!("{}y", d / 365)
    }
}

fn age(obj: &Value, ptr: &str, now: jiff::Timestamp) -> String {
    match s(obj, ptr).parse::<jiff::Timestamp>() {
        Ok(t) => human_duration(now.as_second() - t.as_second()),
        Err(_) => "<unknown>".into(),
    }
}

fn access_modes(v: &Value) -> String {
    let Some(a) = v.as_array() else {
        return String::new();
    };
    a.iter()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn conditions(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| format!("{}/{}", s(c, "/status"), s(c, "/reason")))
                .collect()
        })
        .unwrap_or_default()
}

/// The HEALTH cell: `Status/Reason` joined with ",", `Healthy` when reported with no conditions,
/// `<none>` when nothing was reported.
pub fn health(obj: &Value, printer: Printer) -> String {
    let (entries, prefixed): (Vec<String>, bool) = match printer {
        Printer::Pvc => match obj.pointer("/status/healthStatus") {
            None | Some(Value::Null) => return "<none>".into(),
            Some(h) => (conditions(h.get("healthConditions")), false),
        },
        Printer::Pod | Printer::CsiNode => {
            let field = if printer == Printer::Pod {
                "/status/volumeHealth"
            } else {
                "/status/storageHealth"
            };
            let Some(list) = obj.pointer(field).and_then(Value::as_array) else {
                return "<none>".into();
            };
            let mut out = Vec::new();
            for e in list {
                for c in conditions(e.get("healthConditions")) {
                    out.push(format!("{}:{c}", s(e, "/name")));
                }
            }
            (out, true)
        }
        _ => return String::new(),
    };
    let _ = prefixed;
    if entries.is_empty() {
        "Healthy".into()
    } else {
        entries.join(",")
    }
}

/// The column definitions of a kind.
pub fn columns(p: Printer) -> Vec<Value> {
    let name = col(
        "Name",
        "string",
        0,
        "Name must be unique within a namespace.",
    );
    let age = col(
        "Age",
        "string",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    let health = col(
        "Health",
        "string",
        0,
        "Volume health conditions reported under KEP-1432 (status/reason).",
    );
    match p {
        Printer::Namespace => vec![
            name,
            col("Status", "string", 0, "The status of the namespace"),
            age,
        ],
        Printer::Node => vec![
            name,
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            age,
            col(
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node.",
            ),
            col("Internal-IP", "string", 1, "List of internal IPs."),
            col("External-IP", "string", 1, "List of external IPs."),
            col("OS-Image", "string", 1, "OS Image reported by the node."),
            col(
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node.",
            ),
            col(
                "Container-Runtime",
                "string",
                1,
                "Container Runtime Version reported by the node.",
            ),
        ],
        Printer::Pod => vec![
            name,
            col(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted.",
            ),
            health,
            age,
            col("IP", "string", 1, "IP address allocated to the pod."),
            col(
                "Node",
                "string",
                1,
                "Name of the node the pod is assigned to.",
            ),
            col(
                "Nominated Node",
                "string",
                1,
                "Name of the node where the pod is nominated.",
            ),
            col("Readiness Gates", "string", 1, "Pod readiness gates."),
        ],
        Printer::Pvc => vec![
            name,
            col("Status", "string", 0, "Phase of the claim."),
            col("Volume", "string", 0, "The name of the bound volume."),
            col("Capacity", "string", 0, "Actual capacity of the volume."),
            col("Access Modes", "string", 0, "Access modes of the volume."),
            col(
                "StorageClass",
                "string",
                0,
                "Name of the StorageClass required by the claim.",
            ),
            col(
                "VolumeAttributesClass",
                "string",
                0,
                "Name of the VolumeAttributesClass of the claim.",
            ),
            health,
            age,
            col(
                "VolumeMode",
                "string",
                1,
                "Whether the volume is a filesystem or a raw block device.",
            ),
        ],
        Printer::Pv => vec![
            name,
            col("Capacity", "string", 0, "Capacity of the volume."),
            col("Access Modes", "string", 0, "Access modes of the volume."),
            col(
                "Reclaim Policy",
                "string",
                0,
                "What happens to the volume when released.",
            ),
            col("Status", "string", 0, "Phase of the volume."),
            col("Claim", "string", 0, "The claim bound to the volume."),
            col("StorageClass", "string", 0, "Name of the StorageClass."),
            col(
                "VolumeAttributesClass",
                "string",
                0,
                "Name of the VolumeAttributesClass.",
            ),
            col("Reason", "string", 0, "Reason for the phase."),
            age,
            col(
                "VolumeMode",
                "string",
                1,
                "Whether the volume is a filesystem or a raw block device.",
            ),
        ],
        Printer::Event | Printer::EventV1 => vec![
            col(
                "Last Seen",
                "string",
                0,
                "Time of the most recent occurrence.",
            ),
            col("Type", "string", 0, "Type of this event (Normal, Warning)."),
            col(
                "Reason",
                "string",
                0,
                "Short, machine understandable string for the transition.",
            ),
            col("Object", "string", 0, "The object this event is about."),
            col(
                "Message",
                "string",
                0,
                "A human-readable description of the status of this operation.",
            ),
            col("Source", "string", 1, "The component reporting this event."),
            col("First Seen", "string", 1, "Time of the first occurrence."),
            col(
                "Count",
                "string",
                1,
                "The number of times this event has occurred.",
            ),
            col("Name", "string", 1, "Name of the event."),
        ],
        Printer::CsiNode => vec![
            name,
            col("Drivers", "integer", 0, "Number of CSI drivers registered."),
            health,
            age,
        ],
        Printer::CsiDriver => vec![
            name,
            col(
                "AttachRequired",
                "boolean",
                0,
                "Whether the driver needs attach.",
            ),
            col(
                "PodInfoOnMount",
                "boolean",
                0,
                "Whether pod info is passed on mount.",
            ),
            col(
                "StorageCapacity",
                "boolean",
                0,
                "Whether storage capacity is tracked.",
            ),
            col(
                "TokenRequests",
                "string",
                0,
                "Audiences of service account tokens.",
            ),
            col(
                "RequiresRepublish",
                "boolean",
                0,
                "Whether volumes are republished periodically.",
            ),
            col("Modes", "string", 0, "Volume lifecycle modes."),
            age,
        ],
        Printer::StorageClass => vec![
            name,
            col("Provisioner", "string", 0, "The provisioner of the class."),
            col(
                "ReclaimPolicy",
                "string",
                0,
                "Reclaim policy of volumes of the class.",
            ),
            col("VolumeBindingMode", "string", 0, "When volumes are bound."),
            col(
                "AllowVolumeExpansion",
                "string",
                0,
                "Whether volumes can be expanded.",
            ),
            age,
        ],
        Printer::VolumeAttachment => vec![
            name,
            col("Attacher", "string", 0, "The attacher of the volume."),
            col("PV", "string", 0, "The persistent volume attached."),
            col("Node", "string", 0, "The node the volume is attached to."),
            col("Attached", "boolean", 0, "Whether the volume is attached."),
            age,
        ],
        Printer::Lease => vec![
            name,
            col("Holder", "string", 0, "Holder of the lease."),
            age,
        ],
    }
}

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
            let modes: Vec<String> = o
                .pointer("/spec/volumeLifecycleModes")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
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
    }
}

/// One row with its `object` per `includeObject`.
pub fn row(p: Printer, o: &Value, include: IncludeObject, now: jiff::Timestamp) -> Value {
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => o.clone(),
        IncludeObject::Metadata => partial_metadata(o),
    };
    let mut r = json!({"cells": cells(p, o, now)});
    if !object.is_null() {
        r["object"] = object;
    }
    r
}

/// The PartialObjectMetadata of an object.
pub fn partial_metadata(o: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A whole Table; `with_columns` false leaves out the column definitions (later watch events).
pub fn table(
    p: Printer,
    objs: &[&Value],
    rv: u64,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let now = jiff::Timestamp::now();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": if with_columns { Value::Array(columns(p)) } else { Value::Null },
        "rows": objs.iter().map(|o| row(p, o, include, now)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_health() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(3 * 86400), "3d");
        let pvc = json!({"status": {"healthStatus": {"healthConditions": [
            {"status": "Inaccessible", "reason": "VolumeNotFound"}, {"status": "Degraded", "reason": "Slow"}]}}});
        assert_eq!(
            health(&pvc, Printer::Pvc),
            "Inaccessible/VolumeNotFound,Degraded/Slow"
        );
        assert_eq!(
            health(&json!({"status": {"healthStatus": {}}}), Printer::Pvc),
            "Healthy"
        );
        assert_eq!(health(&json!({}), Printer::Pvc), "<none>");
        for p in [
            Printer::Pod,
            Printer::Pvc,
            Printer::Node,
            Printer::CsiNode,
            Printer::Event,
            Printer::Pv,
        ] {
            assert_eq!(
                columns(p).len(),
                cells(p, &json!({}), jiff::Timestamp::now()).len(),
                "{p:?}"
            );
        }
    }
}
