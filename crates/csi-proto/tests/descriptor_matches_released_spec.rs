//! Our `proto/csi.proto` must compile to the same `csi.v1` as the released
//! CSI v1.13.0 descriptor, name by name and number by number.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod descriptor_diff;

use std::path::PathBuf;

use prost::Message;
use prost_types::FileDescriptorSet;

/// Where the released descriptor lives: `VOLHEALTH_CSI_DESCRIPTOR`, else the
/// copy kept in the repository beside `csi.proto` (a spec artefact, so this
/// test always runs).
fn released_descriptor_path() -> PathBuf {
    match std::env::var_os("VOLHEALTH_CSI_DESCRIPTOR") {
        Some(p) => PathBuf::from(p),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto/csi-v1.13.0-descriptor.pb")
        }
    }
}

fn ours() -> FileDescriptorSet {
    FileDescriptorSet::decode(volhealth_csi_proto::FILE_DESCRIPTOR_SET)
        .expect("decode our descriptor")
}

#[test]
fn descriptor_matches_released_spec() {
    let path = released_descriptor_path();
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "reading the released CSI v1.13.0 descriptor {} ({e}); it ships in proto/, \
             or set VOLHEALTH_CSI_DESCRIPTOR",
            path.display()
        )
    });
    let released =
        descriptor_diff::decode_either(&bytes, "csi.v1").expect("decode released descriptor");
    let ours = ours();
    let released_file =
        descriptor_diff::file_of_package(&released, "csi.v1").expect("released csi.v1");
    let our_file = descriptor_diff::file_of_package(&ours, "csi.v1").expect("our csi.v1");

    let mut diff = descriptor_diff::structural(released_file, our_file);

    let released_pool = descriptor_diff::pool(&bytes).expect("released pool");
    let our_pool =
        descriptor_diff::pool(volhealth_csi_proto::FILE_DESCRIPTOR_SET).expect("our pool");
    let released_options = descriptor_diff::custom_options(&released_pool, "csi.v1");
    let our_options = descriptor_diff::custom_options(&our_pool, "csi.v1");
    diff.extend(descriptor_diff::options(&released_options, &our_options));

    // The comparison would pass vacuously if option decoding lost the
    // extensions, so the health options must be visible in the release.
    for element in [
        "field csi.v1.ControllerListVolumeHealthRequest.secrets",
        "field csi.v1.NodeGetStorageHealthRequest.secrets",
        "method csi.v1.Controller.ControllerListVolumeHealth",
        "method csi.v1.Node.NodeGetStorageHealth",
    ] {
        assert!(
            released_options.contains_key(element),
            "released descriptor shows no custom option on {element}"
        );
    }

    assert!(
        diff.is_empty(),
        "{} difference(s) between proto/csi.proto and the released CSI v1.13.0:\n  {}",
        diff.len(),
        diff.join("\n  ")
    );
}

/// The item of `items` called `name`.
fn named<'a, T>(items: &'a mut [T], name: &str, name_of: impl Fn(&T) -> &str) -> &'a mut T {
    items
        .iter_mut()
        .find(|item| name_of(item) == name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

/// The comparison itself must notice changes, or the test above proves nothing.
#[test]
fn descriptor_diff_reports_every_kind_of_change() {
    let ours = ours();
    let base = descriptor_diff::file_of_package(&ours, "csi.v1").expect("our csi.v1");
    assert!(descriptor_diff::structural(base, base).is_empty());

    let mut changed = base.clone();
    let msg = named(&mut changed.message_type, "VolumeHealth", |m| m.name());
    msg.field[0].number = Some(7);
    let nested = &mut msg.nested_type[0];
    nested.field[0].type_name = Some(".csi.v1.StorageHealthErrorType".into());
    let en = named(&mut changed.enum_type, "VolumeHealthErrorType", |e| {
        e.name()
    });
    en.value[1].number = Some(2);
    let svc = named(&mut changed.service, "Node", |s| s.name());
    svc.method[0].server_streaming = Some(true);
    svc.method.pop();
    let capability = named(&mut changed.message_type, "PluginCapability", |m| m.name());
    capability.field[0].oneof_index = None;

    let diff = descriptor_diff::structural(base, &changed).join("\n");
    for expected in [
        ".csi.v1.VolumeHealth.volume_id: number differs",
        ".csi.v1.VolumeHealth.VolumeHealthEntry.status: type name differs",
        ".csi.v1.VolumeHealthErrorType.DEGRADED: number differs",
        ".csi.v1.Node.NodeStageVolume: server streaming differs",
        "method .csi.v1.Node.NodeGetInfo: missing from ours",
        ".csi.v1.PluginCapability.service: oneof differs",
    ] {
        assert!(diff.contains(expected), "missing {expected:?} in:\n{diff}");
    }
}

/// Option differences (a lost `csi_secret` or `alpha_method`) are reported too.
#[test]
fn descriptor_diff_reports_option_changes() {
    let pool = descriptor_diff::pool(volhealth_csi_proto::FILE_DESCRIPTOR_SET).expect("our pool");
    let base = descriptor_diff::custom_options(&pool, "csi.v1");
    assert!(descriptor_diff::options(&base, &base).is_empty());
    let mut changed = base.clone();
    let secret = "field csi.v1.NodeGetStorageHealthRequest.secrets";
    let alpha = "method csi.v1.Controller.ControllerGetVolumeHealth";
    assert_eq!(changed.remove(secret), Some(vec!["csi_secret".to_string()]));
    assert_eq!(
        changed.remove(alpha),
        Some(vec!["alpha_method".to_string()])
    );
    let diff = descriptor_diff::options(&base, &changed).join("\n");
    assert!(diff.contains(secret) && diff.contains(alpha), "{diff}");
}
