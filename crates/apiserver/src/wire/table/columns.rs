//! The column definitions of each kind, as the real server prints them, plus HEALTH.

use crate::registry::Printer;
use serde_json::{Value, json};

fn col(name: &str, ty: &str, priority: u8, description: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

/// A string column `kubectl get` always prints.
fn text(name: &str, description: &str) -> Value {
    col(name, "string", 0, description)
}

/// A string column only `kubectl get -o wide` prints.
fn wide(name: &str, description: &str) -> Value {
    col(name, "string", 1, description)
}

/// A true/false column `kubectl get` always prints.
fn boolean(name: &str, description: &str) -> Value {
    col(name, "boolean", 0, description)
}

/// The column definitions of a kind.
pub fn columns(p: Printer) -> Vec<Value> {
    let name = text("Name", "Name must be unique within a namespace.");
    let age = text(
        "Age",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    let health = text(
        "Health",
        "Volume health conditions reported under KEP-1432 (status/reason).",
    );
    // Claims and volumes share these two.
    let access_modes = text("Access Modes", "Access modes of the volume.");
    let volume_mode = wide(
        "VolumeMode",
        "Whether the volume is a filesystem or a raw block device.",
    );
    match p {
        Printer::Namespace => vec![name, text("Status", "The status of the namespace"), age],
        Printer::Node => vec![
            name,
            text("Status", "The status of the node"),
            text("Roles", "The roles of the node"),
            age,
            text("Version", "Kubelet Version reported by the node."),
            wide("Internal-IP", "List of internal IPs."),
            wide("External-IP", "List of external IPs."),
            wide("OS-Image", "OS Image reported by the node."),
            wide("Kernel-Version", "Kernel Version reported by the node."),
            wide(
                "Container-Runtime",
                "Container Runtime Version reported by the node.",
            ),
        ],
        Printer::Pod => vec![
            name,
            text(
                "Ready",
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            text(
                "Status",
                "The aggregate status of the containers in this pod.",
            ),
            text(
                "Restarts",
                "The number of times the containers in this pod have been restarted.",
            ),
            health,
            age,
            wide("IP", "IP address allocated to the pod."),
            wide("Node", "Name of the node the pod is assigned to."),
            wide(
                "Nominated Node",
                "Name of the node where the pod is nominated.",
            ),
            wide("Readiness Gates", "Pod readiness gates."),
        ],
        Printer::Pvc => vec![
            name,
            text("Status", "Phase of the claim."),
            text("Volume", "The name of the bound volume."),
            text("Capacity", "Actual capacity of the volume."),
            access_modes.clone(),
            text(
                "StorageClass",
                "Name of the StorageClass required by the claim.",
            ),
            text(
                "VolumeAttributesClass",
                "Name of the VolumeAttributesClass of the claim.",
            ),
            health,
            age,
            volume_mode.clone(),
        ],
        Printer::Pv => vec![
            name,
            text("Capacity", "Capacity of the volume."),
            access_modes,
            text(
                "Reclaim Policy",
                "What happens to the volume when released.",
            ),
            text("Status", "Phase of the volume."),
            text("Claim", "The claim bound to the volume."),
            text("StorageClass", "Name of the StorageClass."),
            text(
                "VolumeAttributesClass",
                "Name of the VolumeAttributesClass.",
            ),
            text("Reason", "Reason for the phase."),
            age,
            volume_mode,
        ],
        Printer::Event | Printer::EventV1 => vec![
            text("Last Seen", "Time of the most recent occurrence."),
            text("Type", "Type of this event (Normal, Warning)."),
            text(
                "Reason",
                "Short, machine understandable string for the transition.",
            ),
            text("Object", "The object this event is about."),
            text(
                "Message",
                "A human-readable description of the status of this operation.",
            ),
            wide("Source", "The component reporting this event."),
            wide("First Seen", "Time of the first occurrence."),
            wide("Count", "The number of times this event has occurred."),
            wide("Name", "Name of the event."),
        ],
        Printer::CsiNode => vec![
            name,
            col("Drivers", "integer", 0, "Number of CSI drivers registered."),
            health,
            age,
        ],
        Printer::CsiDriver => vec![
            name,
            boolean("AttachRequired", "Whether the driver needs attach."),
            boolean("PodInfoOnMount", "Whether pod info is passed on mount."),
            boolean("StorageCapacity", "Whether storage capacity is tracked."),
            text("TokenRequests", "Audiences of service account tokens."),
            boolean(
                "RequiresRepublish",
                "Whether volumes are republished periodically.",
            ),
            text("Modes", "Volume lifecycle modes."),
            age,
        ],
        Printer::StorageClass => vec![
            name,
            text("Provisioner", "The provisioner of the class."),
            text("ReclaimPolicy", "Reclaim policy of volumes of the class."),
            text("VolumeBindingMode", "When volumes are bound."),
            text("AllowVolumeExpansion", "Whether volumes can be expanded."),
            age,
        ],
        Printer::VolumeAttachment => vec![
            name,
            text("Attacher", "The attacher of the volume."),
            text("PV", "The persistent volume attached."),
            text("Node", "The node the volume is attached to."),
            boolean("Attached", "Whether the volume is attached."),
            age,
        ],
        Printer::Pdb => vec![
            name,
            text(
                "Min Available",
                "The minimum number of pods that must be available.",
            ),
            text(
                "Max Unavailable",
                "The maximum number of pods that may be unavailable.",
            ),
            text("Allowed Disruptions", "How many pods may be disrupted now."),
            age,
        ],
        Printer::Lease => vec![name, text("Holder", "Holder of the lease."), age],
        Printer::Secret => vec![
            name,
            text(
                "Type",
                "Used to facilitate programmatic handling of secret data.",
            ),
            text("Data", "Number of keys in the secret's data."),
            age,
        ],
        Printer::ServiceAccount => vec![
            name,
            text(
                "Secrets",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            age,
        ],
        Printer::Role => vec![
            name,
            col(
                "Created At",
                "date",
                0,
                "CreationTimestamp is a timestamp representing the server time when this object was created.",
            ),
        ],
        Printer::RoleBinding => vec![
            name,
            text("Role", "Role references the role the binding grants."),
            age,
            wide("Users", "Users in the binding."),
            wide("Groups", "Groups in the binding."),
            wide("ServiceAccounts", "ServiceAccounts in the binding."),
        ],
        Printer::Review => vec![name, age],
    }
}
