//! The field numbers of the Kubernetes `generated.proto` messages the server reads, as tables:
//! (number, JSON name, type, cardinality). Facts of the wire format, kept to the kinds that
//! kubectl's typed generators send (`kubectl create namespace|secret|serviceaccount|role|...`).

/// A field's value type.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
    /// A string; the empty string is left out.
    Str,
    /// Bytes, as base64 in JSON.
    Bytes,
    /// A bool (the tables hold only pointer bools: presence is kept).
    Bool,
    /// An int64 kept as sent.
    Int,
    /// A non-pointer int64: zero is left out.
    IntOmitZero,
    /// A nested message.
    Msg(&'static Msg),
    /// `metav1.Time`.
    Time,
    /// `metav1.FieldsV1`: raw JSON.
    RawJson,
    /// A map entry with a string key and a value of this type.
    Entry(&'static Ty),
}

/// How often a field occurs.
#[derive(Debug, Clone, Copy)]
pub(super) enum Card {
    /// Once.
    One,
    /// A list.
    Repeated,
    /// A map (entries).
    Map,
}

/// One field of a message.
#[derive(Debug)]
pub(super) struct F {
    /// Field number.
    pub num: u32,
    /// JSON name.
    pub name: &'static str,
    /// Value type.
    pub ty: Ty,
    /// Cardinality.
    pub card: Card,
}

/// One message.
#[derive(Debug)]
pub(super) struct Msg {
    /// Its Go name, for errors.
    pub name: &'static str,
    /// Its fields.
    pub fields: &'static [F],
}

const fn one(num: u32, name: &'static str, ty: Ty) -> F {
    F {
        num,
        name,
        ty,
        card: Card::One,
    }
}
const fn many(num: u32, name: &'static str, ty: Ty) -> F {
    F {
        num,
        name,
        ty,
        card: Card::Repeated,
    }
}
const fn map(num: u32, name: &'static str, value: &'static Ty) -> F {
    F {
        num,
        name,
        ty: Ty::Entry(value),
        card: Card::Map,
    }
}

const STR: &Ty = &Ty::Str;
const BYTES: &Ty = &Ty::Bytes;

/// `metav1.FieldsV1`.
pub(super) static RAW: Msg = Msg {
    name: "FieldsV1",
    fields: &[one(1, "raw", Ty::Bytes)],
};

static OWNER_REFERENCE: Msg = Msg {
    name: "OwnerReference",
    fields: &[
        one(1, "kind", Ty::Str),
        one(3, "name", Ty::Str),
        one(4, "uid", Ty::Str),
        one(5, "apiVersion", Ty::Str),
        one(6, "controller", Ty::Bool),
        one(7, "blockOwnerDeletion", Ty::Bool),
    ],
};

static MANAGED_FIELDS_ENTRY: Msg = Msg {
    name: "ManagedFieldsEntry",
    fields: &[
        one(1, "manager", Ty::Str),
        one(2, "operation", Ty::Str),
        one(3, "apiVersion", Ty::Str),
        one(4, "time", Ty::Time),
        one(6, "fieldsType", Ty::Str),
        one(7, "fieldsV1", Ty::RawJson),
        one(8, "subresource", Ty::Str),
    ],
};

static OBJECT_META: Msg = Msg {
    name: "ObjectMeta",
    fields: &[
        one(1, "name", Ty::Str),
        one(2, "generateName", Ty::Str),
        one(3, "namespace", Ty::Str),
        one(4, "selfLink", Ty::Str),
        one(5, "uid", Ty::Str),
        one(6, "resourceVersion", Ty::Str),
        one(7, "generation", Ty::IntOmitZero),
        one(8, "creationTimestamp", Ty::Time),
        one(9, "deletionTimestamp", Ty::Time),
        one(10, "deletionGracePeriodSeconds", Ty::Int),
        map(11, "labels", STR),
        map(12, "annotations", STR),
        many(13, "ownerReferences", Ty::Msg(&OWNER_REFERENCE)),
        many(14, "finalizers", Ty::Str),
        many(17, "managedFields", Ty::Msg(&MANAGED_FIELDS_ENTRY)),
    ],
};

const META: F = one(1, "metadata", Ty::Msg(&OBJECT_META));

static NAMESPACE_CONDITION: Msg = Msg {
    name: "NamespaceCondition",
    fields: &[
        one(1, "type", Ty::Str),
        one(2, "status", Ty::Str),
        one(4, "lastTransitionTime", Ty::Time),
        one(5, "reason", Ty::Str),
        one(6, "message", Ty::Str),
    ],
};

static NAMESPACE: Msg = Msg {
    name: "Namespace",
    fields: &[
        META,
        one(
            2,
            "spec",
            Ty::Msg(&Msg {
                name: "NamespaceSpec",
                fields: &[many(1, "finalizers", Ty::Str)],
            }),
        ),
        one(
            3,
            "status",
            Ty::Msg(&Msg {
                name: "NamespaceStatus",
                fields: &[
                    one(1, "phase", Ty::Str),
                    many(2, "conditions", Ty::Msg(&NAMESPACE_CONDITION)),
                ],
            }),
        ),
    ],
};

static SECRET: Msg = Msg {
    name: "Secret",
    fields: &[
        META,
        map(2, "data", BYTES),
        one(3, "type", Ty::Str),
        map(4, "stringData", STR),
        one(5, "immutable", Ty::Bool),
    ],
};

static OBJECT_REFERENCE: Msg = Msg {
    name: "ObjectReference",
    fields: &[
        one(1, "kind", Ty::Str),
        one(2, "namespace", Ty::Str),
        one(3, "name", Ty::Str),
        one(4, "uid", Ty::Str),
        one(5, "apiVersion", Ty::Str),
        one(6, "resourceVersion", Ty::Str),
        one(7, "fieldPath", Ty::Str),
    ],
};

static LOCAL_OBJECT_REFERENCE: Msg = Msg {
    name: "LocalObjectReference",
    fields: &[one(1, "name", Ty::Str)],
};

static SERVICE_ACCOUNT: Msg = Msg {
    name: "ServiceAccount",
    fields: &[
        META,
        many(2, "secrets", Ty::Msg(&OBJECT_REFERENCE)),
        many(3, "imagePullSecrets", Ty::Msg(&LOCAL_OBJECT_REFERENCE)),
        one(4, "automountServiceAccountToken", Ty::Bool),
    ],
};

static POLICY_RULE: Msg = Msg {
    name: "PolicyRule",
    fields: &[
        many(1, "verbs", Ty::Str),
        many(2, "apiGroups", Ty::Str),
        many(3, "resources", Ty::Str),
        many(4, "resourceNames", Ty::Str),
        many(5, "nonResourceURLs", Ty::Str),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Msg = Msg {
    name: "LabelSelectorRequirement",
    fields: &[
        one(1, "key", Ty::Str),
        one(2, "operator", Ty::Str),
        many(3, "values", Ty::Str),
    ],
};

static LABEL_SELECTOR: Msg = Msg {
    name: "LabelSelector",
    fields: &[
        map(1, "matchLabels", STR),
        many(2, "matchExpressions", Ty::Msg(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

static ROLE: Msg = Msg {
    name: "Role",
    fields: &[META, many(2, "rules", Ty::Msg(&POLICY_RULE))],
};

static CLUSTER_ROLE: Msg = Msg {
    name: "ClusterRole",
    fields: &[
        META,
        many(2, "rules", Ty::Msg(&POLICY_RULE)),
        one(
            3,
            "aggregationRule",
            Ty::Msg(&Msg {
                name: "AggregationRule",
                fields: &[many(1, "clusterRoleSelectors", Ty::Msg(&LABEL_SELECTOR))],
            }),
        ),
    ],
};

static SUBJECT: Msg = Msg {
    name: "Subject",
    fields: &[
        one(1, "kind", Ty::Str),
        one(2, "apiGroup", Ty::Str),
        one(3, "name", Ty::Str),
        one(4, "namespace", Ty::Str),
    ],
};

static ROLE_REF: Msg = Msg {
    name: "RoleRef",
    fields: &[
        one(1, "apiGroup", Ty::Str),
        one(2, "kind", Ty::Str),
        one(3, "name", Ty::Str),
    ],
};

static ROLE_BINDING: Msg = Msg {
    name: "RoleBinding",
    fields: &[
        META,
        many(2, "subjects", Ty::Msg(&SUBJECT)),
        one(3, "roleRef", Ty::Msg(&ROLE_REF)),
    ],
};

/// The message of a kind in a group, when its protobuf form is read.
pub(super) fn root(group: &str, kind: &str) -> Option<&'static Msg> {
    Some(match (group, kind) {
        ("", "Namespace") => &NAMESPACE,
        ("", "Secret") => &SECRET,
        ("", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("rbac.authorization.k8s.io", "Role") => &ROLE,
        ("rbac.authorization.k8s.io", "ClusterRole") => &CLUSTER_ROLE,
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => &ROLE_BINDING,
        _ => return None,
    })
}
