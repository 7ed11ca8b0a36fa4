//! Pins the released CSI v1.13.0 health names and numbers (the KEP text
//! numbers them differently; the release wins). Checked against both the
//! generated Rust code and the compiled descriptor.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use prost::Message;
use protox::prost_reflect::{DescriptorPool, EnumDescriptor, MessageDescriptor};
use volhealth_csi_proto::v1;
use volhealth_csi_proto::v1::controller_service_capability::rpc::Type as ControllerRpc;
use volhealth_csi_proto::v1::node_service_capability::rpc::Type as NodeRpc;

/// (enum full name, [(value name, number)]): the released values.
const ENUMS: &[(&str, &[(&str, i32)])] = &[
    (
        "csi.v1.VolumeHealthErrorType",
        &[
            ("UNKNOWN_VOLUME_HEALTH_TYPE", 0),
            ("DEGRADED", 1),
            ("INACCESSIBLE", 2),
            ("DATA_LOSS", 3),
        ],
    ),
    (
        "csi.v1.StorageHealthErrorType",
        &[
            ("UNKNOWN_STORAGE_HEALTH_ERROR_TYPE", 0),
            ("STORAGE_DEGRADED", 1),
            ("STORAGE_UNREACHABLE", 2),
        ],
    ),
    (
        "csi.v1.ControllerServiceCapability.RPC.Type",
        &[("GET_VOLUME_HEALTH", 16), ("LIST_VOLUME_HEALTH", 17)],
    ),
    (
        "csi.v1.NodeServiceCapability.RPC.Type",
        &[("GET_VOLUME_HEALTH", 7), ("GET_STORAGE_HEALTH", 8)],
    ),
];

/// (message full name, [(field name, number)]): every field of the health RPCs' messages.
const MESSAGES: &[(&str, &[(&str, u32)])] = &[
    (
        "csi.v1.ControllerListVolumeHealthRequest",
        &[("max_entries", 1), ("starting_token", 2), ("secrets", 3)],
    ),
    (
        "csi.v1.ControllerListVolumeHealthResponse",
        &[("entries", 1), ("next_token", 2)],
    ),
    (
        "csi.v1.VolumeHealth",
        &[("volume_id", 1), ("health_statuses", 2)],
    ),
    (
        "csi.v1.VolumeHealth.VolumeHealthEntry",
        &[("status", 1), ("reason", 2), ("message", 3)],
    ),
    (
        "csi.v1.ControllerGetVolumeHealthRequest",
        &[("volume_id", 1), ("secrets", 2)],
    ),
    (
        "csi.v1.ControllerGetVolumeHealthResponse",
        &[("volume_health", 1)],
    ),
    (
        "csi.v1.NodeGetVolumeHealthRequest",
        &[
            ("volume_id", 1),
            ("volume_publish_path", 2),
            ("staging_target_path", 3),
        ],
    ),
    (
        "csi.v1.NodeGetVolumeHealthResponse",
        &[("volume_health", 1)],
    ),
    ("csi.v1.NodeGetStorageHealthRequest", &[("secrets", 1)]),
    (
        "csi.v1.NodeGetStorageHealthResponse",
        &[("backend_health", 1)],
    ),
    (
        "csi.v1.NodeGetStorageHealthResponse.StorageBackendHealth",
        &[
            ("status", 1),
            ("reason", 2),
            ("message", 3),
            ("volume_capability", 4),
        ],
    ),
];

/// (service, method, input, output) of the four health RPCs.
const RPCS: &[(&str, &str, &str, &str)] = &[
    (
        "csi.v1.Controller",
        "ControllerListVolumeHealth",
        "csi.v1.ControllerListVolumeHealthRequest",
        "csi.v1.ControllerListVolumeHealthResponse",
    ),
    (
        "csi.v1.Controller",
        "ControllerGetVolumeHealth",
        "csi.v1.ControllerGetVolumeHealthRequest",
        "csi.v1.ControllerGetVolumeHealthResponse",
    ),
    (
        "csi.v1.Node",
        "NodeGetVolumeHealth",
        "csi.v1.NodeGetVolumeHealthRequest",
        "csi.v1.NodeGetVolumeHealthResponse",
    ),
    (
        "csi.v1.Node",
        "NodeGetStorageHealth",
        "csi.v1.NodeGetStorageHealthRequest",
        "csi.v1.NodeGetStorageHealthResponse",
    ),
];

fn pool() -> DescriptorPool {
    DescriptorPool::decode(volhealth_csi_proto::FILE_DESCRIPTOR_SET).expect("decode our descriptor")
}

fn enum_named(pool: &DescriptorPool, name: &str) -> EnumDescriptor {
    pool.get_enum_by_name(name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

fn message_named(pool: &DescriptorPool, name: &str) -> MessageDescriptor {
    pool.get_message_by_name(name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

#[test]
fn health_enums_match_the_table_in_the_descriptor() {
    let pool = pool();
    for (enum_name, values) in ENUMS {
        let en = enum_named(&pool, enum_name);
        for (name, number) in *values {
            let value = en
                .get_value_by_name(name)
                .unwrap_or_else(|| panic!("{enum_name}.{name} missing"));
            assert_eq!(value.number(), *number, "{enum_name}.{name}");
        }
    }
    // The error-type enums have exactly the released values, nothing more.
    for (enum_name, values) in &ENUMS[..2] {
        let en = enum_named(&pool, enum_name);
        assert_eq!(en.values().len(), values.len(), "{enum_name} value count");
    }
}

/// Looks a generated enum up by its proto value name and returns its number,
/// after checking the name round-trips.
fn generated(enum_name: &str, value: &str) -> Option<i32> {
    macro_rules! lookup {
        ($ty:ty) => {{
            let v = <$ty>::from_str_name(value)?;
            assert_eq!(v.as_str_name(), value, "{enum_name}");
            assert_eq!(<$ty>::try_from(v as i32).ok(), Some(v), "{enum_name}");
            Some(v as i32)
        }};
    }
    match enum_name {
        "csi.v1.VolumeHealthErrorType" => lookup!(v1::VolumeHealthErrorType),
        "csi.v1.StorageHealthErrorType" => lookup!(v1::StorageHealthErrorType),
        "csi.v1.ControllerServiceCapability.RPC.Type" => lookup!(ControllerRpc),
        "csi.v1.NodeServiceCapability.RPC.Type" => lookup!(NodeRpc),
        other => panic!("no generated type for {other}"),
    }
}

#[test]
fn health_enums_match_the_table_in_generated_code() {
    for (enum_name, values) in ENUMS {
        for (name, number) in *values {
            assert_eq!(
                generated(enum_name, name),
                Some(*number),
                "{enum_name}.{name}"
            );
        }
    }
    // The names other crates code against.
    assert_eq!(v1::VolumeHealthErrorType::UnknownVolumeHealthType as i32, 0);
    assert_eq!(v1::VolumeHealthErrorType::Degraded as i32, 1);
    assert_eq!(v1::VolumeHealthErrorType::Inaccessible as i32, 2);
    assert_eq!(v1::VolumeHealthErrorType::DataLoss as i32, 3);
    assert_eq!(
        v1::StorageHealthErrorType::UnknownStorageHealthErrorType as i32,
        0
    );
    assert_eq!(v1::StorageHealthErrorType::StorageDegraded as i32, 1);
    assert_eq!(v1::StorageHealthErrorType::StorageUnreachable as i32, 2);
    assert_eq!(ControllerRpc::GetVolumeHealth as i32, 16);
    assert_eq!(ControllerRpc::ListVolumeHealth as i32, 17);
    assert_eq!(NodeRpc::GetVolumeHealth as i32, 7);
    assert_eq!(NodeRpc::GetStorageHealth as i32, 8);
}

#[test]
fn health_message_fields_match_the_table_in_the_descriptor() {
    let pool = pool();
    for (message_name, fields) in MESSAGES {
        let message = message_named(&pool, message_name);
        assert_eq!(
            message.fields().len(),
            fields.len(),
            "{message_name} field count"
        );
        for (name, number) in *fields {
            let field = message
                .get_field_by_name(name)
                .unwrap_or_else(|| panic!("{message_name}.{name} missing"));
            assert_eq!(field.number(), *number, "{message_name}.{name}");
        }
    }
    for (service, method, input, output) in RPCS {
        let svc = pool.get_service_by_name(service).expect("service");
        let m = svc
            .methods()
            .find(|m| m.name() == *method)
            .unwrap_or_else(|| panic!("{service}.{method} missing"));
        assert_eq!(m.input().full_name(), *input);
        assert_eq!(m.output().full_name(), *output);
        assert!(
            !m.is_client_streaming() && !m.is_server_streaming(),
            "{method} is unary"
        );
    }
}

/// The field number of the only field present in an encoded message.
fn only_field_number(bytes: &[u8]) -> u32 {
    let mut buf = bytes;
    let (number, _) = prost::encoding::decode_key(&mut buf).expect("a field key");
    number
}

/// Encodes `msg` (which has exactly one non-default field) and returns its number.
fn number_of<M: Message + Default>(msg: M) -> u32 {
    let bytes = msg.encode_to_vec();
    let number = only_field_number(&bytes);
    let mut check = M::default();
    check.merge(bytes.as_slice()).expect("decode");
    number
}

/// `(message name, field name, field number on the wire)` of every field listed: each field
/// of the generated type is set alone to its sample value, and [`number_of`] reads its number.
macro_rules! encoded {
    ($($message:literal => $ty:ty { $($field:ident: $value:expr),+ $(,)? })+) => {
        [$({
            type Message = $ty;
            vec![$((
                $message,
                stringify!($field),
                {
                    #[allow(clippy::needless_update)]
                    let alone = Message {
                        $field: $value,
                        ..Default::default()
                    };
                    number_of(alone)
                },
            )),+]
        }),+]
        .concat()
    };
}

fn secrets() -> std::collections::HashMap<String, String> {
    [("k".to_string(), "v".to_string())].into()
}

#[test]
fn health_message_fields_match_the_table_in_generated_code() {
    use v1::node_get_storage_health_response::StorageBackendHealth;
    use v1::volume_health::VolumeHealthEntry;
    let encoded: Vec<(&str, &str, u32)> = encoded! {
        "csi.v1.ControllerListVolumeHealthRequest" => v1::ControllerListVolumeHealthRequest {
            max_entries: 5,
            starting_token: "t".into(),
            secrets: secrets(),
        }
        "csi.v1.ControllerListVolumeHealthResponse" => v1::ControllerListVolumeHealthResponse {
            entries: vec![Default::default()],
            next_token: "n".into(),
        }
        "csi.v1.VolumeHealth" => v1::VolumeHealth {
            volume_id: "v".into(),
            health_statuses: vec![Default::default()],
        }
        "csi.v1.VolumeHealth.VolumeHealthEntry" => VolumeHealthEntry {
            status: 2,
            reason: "r".into(),
            message: "m".into(),
        }
        "csi.v1.ControllerGetVolumeHealthRequest" => v1::ControllerGetVolumeHealthRequest {
            volume_id: "v".into(),
            secrets: secrets(),
        }
        "csi.v1.ControllerGetVolumeHealthResponse" => v1::ControllerGetVolumeHealthResponse {
            volume_health: Some(Default::default()),
        }
        "csi.v1.NodeGetVolumeHealthRequest" => v1::NodeGetVolumeHealthRequest {
            volume_id: "v".into(),
            volume_publish_path: "/p".into(),
            staging_target_path: "/s".into(),
        }
        "csi.v1.NodeGetVolumeHealthResponse" => v1::NodeGetVolumeHealthResponse {
            volume_health: Some(Default::default()),
        }
        "csi.v1.NodeGetStorageHealthRequest" => v1::NodeGetStorageHealthRequest {
            secrets: secrets(),
        }
        "csi.v1.NodeGetStorageHealthResponse" => v1::NodeGetStorageHealthResponse {
            backend_health: vec![Default::default()],
        }
        "csi.v1.NodeGetStorageHealthResponse.StorageBackendHealth" => StorageBackendHealth {
            status: 1,
            reason: "r".into(),
            message: "m".into(),
            volume_capability: Some(Default::default()),
        }
    };
    let mut covered = 0;
    for (message_name, fields) in MESSAGES {
        for (name, number) in *fields {
            let found = encoded
                .iter()
                .find(|(m, f, _)| m == message_name && f == name)
                .unwrap_or_else(|| panic!("no generated-code check for {message_name}.{name}"));
            assert_eq!(found.2, *number, "{message_name}.{name} on the wire");
            covered += 1;
        }
    }
    assert_eq!(
        covered,
        encoded.len(),
        "every encoded check is in the table"
    );
}
