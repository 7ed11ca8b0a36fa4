//! The column definitions of each kind, as the real server prints them, plus HEALTH.

use crate::registry::Printer;
use serde_json::{Value, json};

fn col(name: &str, ty: &str, priority: u8, description: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
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
    // Claims and volumes share these two.
    let access_modes = col("Access Modes", "string", 0, "Access modes of the volume.");
    let volume_mode = col(
        "VolumeMode",
        "string",
        1,
        "Whether the volume is a filesystem or a raw block device.",
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
            access_modes.clone(),
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
            volume_mode.clone(),
        ],
        Printer::Pv => vec![
            name,
            col("Capacity", "string", 0, "Capacity of the volume."),
            access_modes,
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
            volume_mode,
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
        Printer::Pdb => vec![
            name,
            col(
                "Min Available",
                "string",
                0,
                "The minimum number of pods that must be available.",
            ),
            col(
                "Max Unavailable",
                "string",
                0,
                "The maximum number of pods that may be unavailable.",
            ),
            col(
                "Allowed Disruptions",
                "string",
                0,
                "How many pods may be disrupted now.",
            ),
            age,
        ],
        Printer::Lease => vec![
            name,
            col("Holder", "string", 0, "Holder of the lease."),
            age,
        ],
        Printer::Secret => vec![
            name,
            col(
                "Type",
                "string",
                0,
                "Used to facilitate programmatic handling of secret data.",
            ),
            col("Data", "string", 0, "Number of keys in the secret's data."),
            age,
        ],
        Printer::ServiceAccount => vec![
            name,
            col(
                "Secrets",
                "string",
                0,
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
            col(
                "Role",
                "string",
                0,
                "Role references the role the binding grants.",
            ),
            age,
            col("Users", "string", 1, "Users in the binding."),
            col("Groups", "string", 1, "Groups in the binding."),
            col(
                "ServiceAccounts",
                "string",
                1,
                "ServiceAccounts in the binding.",
            ),
        ],
        Printer::Review => vec![name, age],
    }
}
