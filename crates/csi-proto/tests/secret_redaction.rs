//! Values of `csi_secret` fields never show up in `Debug` output (that RPC errors
//! hide them too is tested in `volhealth-csi`).
//! The secret-bearing messages are found by scanning the compiled descriptor,
//! not from a hand-written list.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;
use prost::Message;
use protox::prost_reflect::{
    DescriptorPool, DynamicMessage, ExtensionDescriptor, FieldDescriptor, Kind, MapKey,
    MessageDescriptor, Value,
};
use volhealth_csi_proto::v1;

include!(concat!(env!("OUT_DIR"), "/csi.v1.secret_messages.rs"));

const SECRET: &str = "s3cr3t-VALUE";
const SECRET_KEY: &str = "s3cr3t-KEY";

fn pool() -> DescriptorPool {
    DescriptorPool::decode(volhealth_csi_proto::FILE_DESCRIPTOR_SET).expect("decode our descriptor")
}

fn secret_ext(pool: &DescriptorPool) -> ExtensionDescriptor {
    pool.get_extension_by_name("csi.v1.csi_secret")
        .expect("csi_secret extension")
}

fn is_secret(field: &FieldDescriptor, ext: &ExtensionDescriptor) -> bool {
    field.options().get_extension(ext).as_bool() == Some(true)
}

fn secret_messages(pool: &DescriptorPool) -> Vec<MessageDescriptor> {
    let ext = secret_ext(pool);
    pool.all_messages()
        .filter(|m| m.package_name() == "csi.v1")
        .filter(|m| m.fields().any(|f| is_secret(&f, &ext)))
        .collect()
}

/// An instance of `desc` with every secret field holding [`SECRET`] and every
/// plain string field holding `visible-<name>`.
fn filled(desc: &MessageDescriptor, ext: &ExtensionDescriptor) -> DynamicMessage {
    let mut msg = DynamicMessage::new(desc.clone());
    for field in desc.fields() {
        if is_secret(&field, ext) {
            let value = if field.is_map() {
                Value::Map(HashMap::from([
                    (
                        MapKey::String(SECRET_KEY.into()),
                        Value::String(SECRET.into()),
                    ),
                    (
                        MapKey::String("password".into()),
                        Value::String(SECRET.into()),
                    ),
                ]))
            } else if field.is_list() {
                Value::List(vec![Value::String(SECRET.into())])
            } else {
                Value::String(SECRET.into())
            };
            msg.set_field(&field, value);
        } else if matches!(field.kind(), Kind::String) && !field.is_list() && !field.is_map() {
            msg.set_field(&field, Value::String(format!("visible-{}", field.name())));
        }
    }
    msg
}

#[test]
fn every_secret_bearing_message_has_a_redacting_debug() {
    let pool = pool();
    let found: BTreeSet<String> = secret_messages(&pool)
        .iter()
        .map(|m| m.full_name().to_string())
        .collect();
    let generated: BTreeSet<String> = SECRET_MESSAGES.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(
        found, generated,
        "descriptor scan and generated impls disagree"
    );
    for health in [
        "csi.v1.ControllerListVolumeHealthRequest",
        "csi.v1.ControllerGetVolumeHealthRequest",
        "csi.v1.NodeGetStorageHealthRequest",
        "csi.v1.CreateVolumeRequest",
        "csi.v1.NodeStageVolumeRequest",
    ] {
        assert!(
            found.contains(health),
            "{health} should carry a csi_secret field"
        );
    }
}

#[test]
fn debug_of_every_secret_bearing_message_hides_values_but_names_fields() {
    let pool = pool();
    let ext = secret_ext(&pool);
    for desc in secret_messages(&pool) {
        let (_, debug_of) = SECRET_MESSAGES
            .iter()
            .find(|(n, _)| *n == desc.full_name())
            .unwrap_or_else(|| panic!("no Debug for {}", desc.full_name()));
        let bytes = filled(&desc, &ext).encode_to_vec();
        let text = debug_of(&bytes).expect("decode generated message");
        let name = desc.full_name();
        assert!(
            !text.contains(SECRET),
            "{name} leaks a secret value: {text}"
        );
        assert!(
            !text.contains(SECRET_KEY),
            "{name} leaks a secret key: {text}"
        );
        for field in desc.fields() {
            let shown = match field.containing_oneof() {
                Some(oneof) if !oneof.is_synthetic() => oneof.name().to_string(),
                _ => field.name().to_string(),
            };
            assert!(
                text.contains(&shown),
                "{name}: field {shown} missing: {text}"
            );
            if is_secret(&field, &ext) && field.is_map() {
                assert!(
                    text.contains(&format!("{}: <redacted 2 keys>", field.name())),
                    "{name}.{}: expected a key count: {text}",
                    field.name()
                );
            } else if matches!(field.kind(), Kind::String) && !field.is_list() {
                let visible = format!("visible-{}", field.name());
                assert!(
                    text.contains(&visible),
                    "{name}: {visible} not printed: {text}"
                );
            }
        }
    }
}

#[test]
fn redacting_debug_still_shows_nested_messages() {
    let req = v1::CreateVolumeRequest {
        name: "pvc-1".into(),
        volume_capabilities: vec![v1::VolumeCapability {
            access_type: Some(v1::volume_capability::AccessType::Mount(
                v1::volume_capability::MountVolume {
                    fs_type: "ext4".into(),
                    ..Default::default()
                },
            )),
            access_mode: None,
        }],
        secrets: [("token".to_string(), SECRET.to_string())].into(),
        ..Default::default()
    };
    let text = format!("{req:?}");
    assert!(text.contains("ext4") && text.contains("pvc-1"), "{text}");
    assert!(text.contains("secrets: <redacted 1 keys>"), "{text}");
    assert!(!text.contains(SECRET) && !text.contains("token"), "{text}");
    // Alternate form too.
    assert!(!format!("{req:#?}").contains(SECRET));
}

fn secret_string() -> impl Strategy<Value = String> {
    // A marker prefix keeps short random values from matching other output.
    "[A-Za-z0-9 _./+=:-]{1,48}".prop_map(|s| format!("Zq7~{s}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn health_requests_never_print_secrets(
        pairs in proptest::collection::hash_map(secret_string(), secret_string(), 1..6)
    ) {
        let texts = [
            format!("{:?}", v1::ControllerListVolumeHealthRequest {
                max_entries: 10,
                starting_token: "t".into(),
                secrets: pairs.clone(),
            }),
            format!("{:#?}", v1::ControllerGetVolumeHealthRequest {
                volume_id: "vol-1".into(),
                secrets: pairs.clone(),
            }),
            format!("{:?}", v1::NodeGetStorageHealthRequest { secrets: pairs.clone() }),
        ];
        for text in &texts {
            for (k, v) in &pairs {
                prop_assert!(!text.contains(v.as_str()), "value leaked: {}", text);
                prop_assert!(!text.contains(k.as_str()), "key leaked: {}", text);
            }
            let count = format!("<redacted {} keys>", pairs.len());
            prop_assert!(text.contains(&count), "{}", text);
        }
    }
}
