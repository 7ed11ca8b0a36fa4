//! The static table of served resources: it drives routing, discovery, tables, selectors and
//! strategic merge.

/// Which printer builds the `kubectl get` columns of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Printer {
    /// Namespaces.
    Namespace,
    /// Nodes.
    Node,
    /// Pods.
    Pod,
    /// PersistentVolumeClaims.
    Pvc,
    /// PersistentVolumes.
    Pv,
    /// core/v1 Events.
    Event,
    /// events.k8s.io/v1 Events.
    EventV1,
    /// CSINodes.
    CsiNode,
    /// CSIDrivers.
    CsiDriver,
    /// StorageClasses.
    StorageClass,
    /// VolumeAttachments.
    VolumeAttachment,
    /// Leases.
    Lease,
    /// Secrets.
    Secret,
    /// ServiceAccounts.
    ServiceAccount,
    /// Roles and ClusterRoles.
    Role,
    /// RoleBindings and ClusterRoleBindings.
    RoleBinding,
    /// The review resources: created and answered, never stored.
    Review,
    /// PodDisruptionBudgets.
    Pdb,
}

/// One served resource.
#[derive(Debug)]
pub struct ResourceDef {
    /// API group, "" for core.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name (URL segment).
    pub plural: &'static str,
    /// Singular name.
    pub singular: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Discovery categories.
    pub categories: &'static [&'static str],
    /// Whether a `/status` subresource exists.
    pub has_status: bool,
    /// Field selector labels besides metadata.name and metadata.namespace.
    pub fields: &'static [&'static str],
    /// The table printer.
    pub printer: Printer,
    /// Strategic merge list keys: (dotted path from the object root, merge key; "" = set of scalars).
    pub merge_keys: &'static [(&'static str, &'static str)],
}

/// Core events; events.k8s.io serves the same objects under its own group, fields and printer.
const CORE_EVENTS: ResourceDef = ResourceDef {
    group: "",
    version: "v1",
    plural: "events",
    singular: "event",
    kind: "Event",
    namespaced: true,
    short_names: &["ev"],
    categories: &[],
    has_status: false,
    fields: EVENT_FIELDS,
    printer: Printer::Event,
    merge_keys: &[],
};

/// A v1 resource with nothing beyond its names, scope and printer: no short names, categories,
/// status subresource, extra field selectors or merge keys.
const fn plain(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    printer: Printer,
) -> ResourceDef {
    ResourceDef {
        group,
        version: "v1",
        plural,
        singular,
        kind,
        namespaced,
        short_names: &[],
        categories: &[],
        has_status: false,
        fields: &[],
        printer,
        merge_keys: &[],
    }
}

/// A cluster-scoped v1 review (`create` only, answered at once, never stored).
const fn review(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
) -> ResourceDef {
    plain(group, plural, singular, kind, false, Printer::Review)
}

impl ResourceDef {
    /// `apiVersion` of the objects, e.g. `storage.k8s.io/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage name of the resource, unique across groups; events.k8s.io events share the
    /// core events' storage (see `convert`).
    pub fn store_name(&self) -> String {
        if self.group.is_empty() || self.printer == Printer::EventV1 {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The strategic merge key of the list at `path`, if it merges by key.
    pub fn merge_key(&self, path: &str) -> Option<&'static str> {
        METADATA_MERGE_KEYS
            .iter()
            .chain(self.merge_keys.iter())
            .find(|(p, _)| *p == path)
            .map(|(_, k)| *k)
    }

    /// The verbs the resource serves (discovery lists them).
    pub fn verbs(&self) -> &'static [&'static str] {
        if self.printer == Printer::Review {
            &["create"]
        } else {
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        }
    }

    /// Whether `label` is a supported field selector label.
    pub fn selectable(&self, label: &str) -> bool {
        label == "metadata.name"
            || (label == "metadata.namespace" && self.namespaced)
            || self.fields.contains(&label)
    }
}

const METADATA_MERGE_KEYS: &[(&str, &str)] = &[
    ("metadata.ownerReferences", "uid"),
    ("metadata.finalizers", ""),
];

const CONTAINER_KEYS: &[(&str, &str)] = &[
    ("spec.containers", "name"),
    ("spec.initContainers", "name"),
    ("spec.ephemeralContainers", "name"),
    ("spec.containers.ports", "containerPort"),
    ("spec.initContainers.ports", "containerPort"),
    ("spec.containers.env", "name"),
    ("spec.initContainers.env", "name"),
    ("spec.containers.volumeMounts", "mountPath"),
    ("spec.initContainers.volumeMounts", "mountPath"),
    ("spec.containers.volumeDevices", "devicePath"),
    ("spec.initContainers.volumeDevices", "devicePath"),
    ("spec.volumes", "name"),
    ("spec.imagePullSecrets", "name"),
    ("spec.hostAliases", "ip"),
    ("spec.resourceClaims", "name"),
    ("spec.schedulingGates", "name"),
    ("status.conditions", "type"),
    ("status.podIPs", "ip"),
    ("status.hostIPs", "ip"),
    ("status.volumeHealth", "name"),
];

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

const EVENT_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
];

/// Every served resource.
pub static RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: &[],
        has_status: true,
        fields: &["status.phase"],
        printer: Printer::Namespace,
        merge_keys: &[("status.conditions", "type")],
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        categories: &[],
        has_status: true,
        fields: &["spec.unschedulable"],
        printer: Printer::Node,
        merge_keys: &[
            ("status.conditions", "type"),
            ("status.addresses", "type"),
            ("spec.podCIDRs", ""),
        ],
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        has_status: true,
        fields: &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        printer: Printer::Pod,
        merge_keys: CONTAINER_KEYS,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        short_names: &["pvc"],
        categories: &[],
        has_status: true,
        fields: &["status.phase", "spec.volumeName", "spec.storageClassName"],
        printer: Printer::Pvc,
        merge_keys: &[("status.conditions", "type")],
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        kind: "PersistentVolume",
        namespaced: false,
        short_names: &["pv"],
        categories: &[],
        has_status: true,
        fields: &[
            "status.phase",
            "spec.storageClassName",
            "spec.claimRef.name",
            "spec.claimRef.namespace",
        ],
        printer: Printer::Pv,
        merge_keys: &[],
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        categories: &[],
        has_status: false,
        fields: &["type"],
        printer: Printer::Secret,
        merge_keys: &[],
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        short_names: &["sa"],
        categories: &[],
        has_status: false,
        fields: &[],
        printer: Printer::ServiceAccount,
        merge_keys: &[],
    },
    CORE_EVENTS,
    ResourceDef {
        group: "events.k8s.io",
        fields: EVENT_V1_FIELDS,
        printer: Printer::EventV1,
        ..CORE_EVENTS
    },
    ResourceDef {
        group: "storage.k8s.io",
        version: "v1",
        plural: "csinodes",
        singular: "csinode",
        kind: "CSINode",
        namespaced: false,
        short_names: &[],
        categories: &[],
        has_status: true,
        fields: &[],
        printer: Printer::CsiNode,
        merge_keys: &[("spec.drivers", "name"), ("status.storageHealth", "name")],
    },
    plain(
        "storage.k8s.io",
        "csidrivers",
        "csidriver",
        "CSIDriver",
        false,
        Printer::CsiDriver,
    ),
    ResourceDef {
        group: "storage.k8s.io",
        version: "v1",
        plural: "storageclasses",
        singular: "storageclass",
        kind: "StorageClass",
        namespaced: false,
        short_names: &["sc"],
        categories: &[],
        has_status: false,
        fields: &[],
        printer: Printer::StorageClass,
        merge_keys: &[],
    },
    ResourceDef {
        group: "storage.k8s.io",
        version: "v1",
        plural: "volumeattachments",
        singular: "volumeattachment",
        kind: "VolumeAttachment",
        namespaced: false,
        short_names: &[],
        categories: &[],
        has_status: true,
        fields: &[],
        printer: Printer::VolumeAttachment,
        merge_keys: &[],
    },
    plain(
        "coordination.k8s.io",
        "leases",
        "lease",
        "Lease",
        true,
        Printer::Lease,
    ),
    plain(
        "rbac.authorization.k8s.io",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
        Printer::Role,
    ),
    plain(
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
        Printer::RoleBinding,
    ),
    plain(
        "rbac.authorization.k8s.io",
        "roles",
        "role",
        "Role",
        true,
        Printer::Role,
    ),
    plain(
        "rbac.authorization.k8s.io",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        Printer::RoleBinding,
    ),
    ResourceDef {
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short_names: &["pdb"],
        categories: &[],
        has_status: true,
        fields: &[],
        printer: Printer::Pdb,
        merge_keys: &[("status.conditions", "type")],
    },
    review(
        "authentication.k8s.io",
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
    ),
    review(
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
    ),
    review(
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
    ),
    review(
        "authorization.k8s.io",
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
    ),
];

/// Looks up a resource by group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The served (group, version) pairs in discovery order, core first.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The resources of one group version, in table order.
pub fn in_group_version(group: &str, version: &str) -> impl Iterator<Item = &'static ResourceDef> {
    let (g, v) = (group.to_string(), version.to_string());
    RESOURCES
        .iter()
        .filter(move |r| r.group == g && r.version == v)
}
