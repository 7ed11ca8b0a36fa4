//! The field numbers of the Kubernetes `generated.proto` messages the server reads, as tables:
//! (number, JSON name, type, cardinality), one file per API group. Facts of the wire format.
//! Each message is declared with [`msg!`]; a field no table lists is refused by the decoder.

mod coordination;
mod core;
mod events;
mod meta;
mod pod;
mod policy;
mod rbac;
mod storage;
mod volume;

/// A field's value type.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
    /// A string; the empty string is left out (Go writes every non-pointer string).
    Str,
    /// A pointer string, whose empty value means something (`storageClassName: ""`).
    StrKeep,
    /// Bytes, as base64 in JSON.
    Bytes,
    /// A bool, kept as sent.
    Bool,
    /// An int32 or int64, kept as sent.
    Int,
    /// A non-pointer int64 the server sets itself (`generation`): zero is left out.
    IntOmitZero,
    /// A nested message.
    Msg(&'static Msg),
    /// `metav1.Time`: whole seconds.
    Time,
    /// `metav1.MicroTime`: microseconds.
    MicroTime,
    /// `metav1.FieldsV1` or `runtime.RawExtension`: raw JSON in field 1.
    RawJson,
    /// `resource.Quantity`: its string form in field 1.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// A map entry with a string key and a value of this type.
    Entry(&'static Ty),
}

/// How often a field occurs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Card {
    /// Once.
    One,
    /// A list.
    Repeated,
    /// A map (entries).
    Map,
    /// An embedded message whose fields JSON puts in the parent (`json:",inline"`: a Probe's
    /// handler, a Volume's source).
    Inline,
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

/// A field that occurs once.
const fn one(num: u32, name: &'static str, ty: Ty) -> F {
    F {
        num,
        name,
        ty,
        card: Card::One,
    }
}

/// A list field.
const fn many(num: u32, name: &'static str, ty: Ty) -> F {
    F {
        num,
        name,
        ty,
        card: Card::Repeated,
    }
}

/// A map field with string keys.
const fn map(num: u32, name: &'static str, value: &'static Ty) -> F {
    F {
        num,
        name,
        ty: Ty::Entry(value),
        card: Card::Map,
    }
}

/// An embedded message inlined in JSON.
const fn inline(num: u32, msg: &'static Msg) -> F {
    F {
        num,
        name: "",
        ty: Ty::Msg(msg),
        card: Card::Inline,
    }
}

/// A nested message type.
const fn m(msg: &'static Msg) -> Ty {
    Ty::Msg(msg)
}

/// Declares a message table: `msg! { NAME "GoName" one(1, "json", Ty), ... }`.
macro_rules! msg {
    ($id:ident $name:literal $($field:expr),* $(,)?) => {
        pub(super) static $id: $crate::wire::protobuf::schema::Msg = $crate::wire::protobuf::schema::Msg {
            name: $name,
            fields: &[$($field),*],
        };
    };
}
pub(super) use msg;

/// The preamble of every table file.
mod prelude {
    pub(super) use super::Ty::{
        Bool, Bytes, Int, IntOmitZero, IntOrString, MicroTime, Quantity, RawJson, Str, StrKeep,
        Time,
    };
    pub(super) use super::{inline, m, many, map, msg, one};
}

/// `metav1.FieldsV1` and `runtime.RawExtension`: the raw bytes in field 1.
pub(super) static RAW: Msg = Msg {
    name: "RawExtension",
    fields: &[one(1, "raw", Ty::Bytes)],
};

/// The message of a kind in a group, when its protobuf form is read.
pub(super) fn root(group: &str, kind: &str) -> Option<&'static Msg> {
    Some(match (group, kind) {
        ("", "Namespace") => &core::NAMESPACE,
        ("", "Secret") => &core::SECRET,
        ("", "ServiceAccount") => &core::SERVICE_ACCOUNT,
        ("", "Node") => &core::NODE,
        ("", "Event") => &core::EVENT,
        ("", "Binding") => &core::BINDING,
        ("", "Pod") => &pod::POD,
        ("", "PersistentVolumeClaim") => &volume::PERSISTENT_VOLUME_CLAIM,
        ("", "PersistentVolume") => &volume::PERSISTENT_VOLUME,
        ("policy", "Eviction") => &policy::EVICTION,
        ("policy", "PodDisruptionBudget") => &policy::POD_DISRUPTION_BUDGET,
        ("events.k8s.io", "Event") => &events::EVENT,
        ("storage.k8s.io", "CSINode") => &storage::CSI_NODE,
        ("storage.k8s.io", "CSIDriver") => &storage::CSI_DRIVER,
        ("storage.k8s.io", "StorageClass") => &storage::STORAGE_CLASS,
        ("storage.k8s.io", "VolumeAttachment") => &storage::VOLUME_ATTACHMENT,
        ("coordination.k8s.io", "Lease") => &coordination::LEASE,
        ("rbac.authorization.k8s.io", "Role") => &rbac::ROLE,
        ("rbac.authorization.k8s.io", "ClusterRole") => &rbac::CLUSTER_ROLE,
        ("rbac.authorization.k8s.io", "RoleBinding") => &rbac::ROLE_BINDING,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => &rbac::CLUSTER_ROLE_BINDING,
        _ => return None,
    })
}
