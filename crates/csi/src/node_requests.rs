//! The node requests of a filesystem volume's life, as the kubelet sends them: stage at a
//! staging path, publish from there to a target path, and the undoing of both. Each carries
//! what every caller sends; a caller that has more for its driver (secrets, contexts) adds it
//! with struct update syntax: `v1::NodeStageVolumeRequest { secrets, ..stage(id, path) }`.

use crate::v1;
use std::path::Path;

/// The capability of a filesystem volume one node writes (`SINGLE_NODE_WRITER`, mount), as
/// the kubelet asks for a `ReadWriteOnce` claim of `volumeMode: Filesystem`.
pub fn mount_capability() -> v1::VolumeCapability {
    v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Mount(
            v1::volume_capability::MountVolume::default(),
        )),
        access_mode: Some(v1::volume_capability::AccessMode {
            mode: v1::volume_capability::access_mode::Mode::SingleNodeWriter as i32,
        }),
    }
}

/// NodeStageVolume of `volume_id` at `staging`, with [`mount_capability`].
pub fn stage(volume_id: &str, staging: &Path) -> v1::NodeStageVolumeRequest {
    v1::NodeStageVolumeRequest {
        volume_id: volume_id.to_string(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(mount_capability()),
        ..Default::default()
    }
}

/// NodePublishVolume of `volume_id`, staged at `staging` (empty for a driver without
/// STAGE_UNSTAGE_VOLUME), at `target`, writable, with [`mount_capability`].
pub fn publish(volume_id: &str, staging: &Path, target: &Path) -> v1::NodePublishVolumeRequest {
    v1::NodePublishVolumeRequest {
        volume_id: volume_id.to_string(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(mount_capability()),
        ..Default::default()
    }
}

/// NodeUnpublishVolume of `volume_id` at `target`.
pub fn unpublish(volume_id: &str, target: &Path) -> v1::NodeUnpublishVolumeRequest {
    v1::NodeUnpublishVolumeRequest {
        volume_id: volume_id.to_string(),
        target_path: target.display().to_string(),
    }
}

/// NodeUnstageVolume of `volume_id` at `staging`.
pub fn unstage(volume_id: &str, staging: &Path) -> v1::NodeUnstageVolumeRequest {
    v1::NodeUnstageVolumeRequest {
        volume_id: volume_id.to_string(),
        staging_target_path: staging.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_paths_as_given_and_a_writable_mount() {
        let staged = stage("v", Path::new("/s/globalmount"));
        assert_eq!(staged.staging_target_path, "/s/globalmount");
        let published = publish("v", Path::new(""), Path::new("/p/mount"));
        assert_eq!(published.staging_target_path, "", "no staging: empty");
        assert_eq!(published.target_path, "/p/mount");
        assert!(!published.readonly);
        for capability in [staged.volume_capability, published.volume_capability] {
            let capability = capability.expect("a capability");
            assert!(matches!(
                capability.access_type,
                Some(v1::volume_capability::AccessType::Mount(_))
            ));
            assert_eq!(
                capability.access_mode.map(|m| m.mode),
                Some(v1::volume_capability::access_mode::Mode::SingleNodeWriter as i32)
            );
        }
        assert_eq!(
            unpublish("v", Path::new("/p/mount")).target_path,
            "/p/mount"
        );
        assert_eq!(
            unstage("v", Path::new("/s/globalmount")).staging_target_path,
            "/s/globalmount"
        );
    }
}
