//! Reading the kubelet's directories to learn which volumes it attempted to stage or publish.
//!
//! The layout (as the kubelet's CSI volume plugin writes it):
//! - `<root>/pods/<podUID>/volumes/kubernetes.io~csi/<pvName or inline volume name>/` holding `mount` (the
//!   publish target) and `vol_data.json` once a publish was attempted;
//! - `<root>/plugins/kubernetes.io/csi/<driver>/<sha256 hex of volume handle>/globalmount` (the staging target),
//!   with `vol_data.json` beside it, once a stage was attempted. Older kubelets used
//!   `<root>/plugins/kubernetes.io/csi/pv/<pvName>/globalmount`.

use crate::pod_volumes::CsiVolume;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The paths passed to NodeGetVolumeHealth, present only where the kubelet has attempted the operation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountAttempt {
    /// The publish target (`.../<name>/mount`), when a publish was attempted.
    pub publish_path: Option<PathBuf>,
    /// The staging target (`.../globalmount`), when a stage was attempted.
    pub staging_path: Option<PathBuf>,
}

impl MountAttempt {
    /// True when the kubelet attempted to stage or publish the volume.
    pub fn attempted(&self) -> bool {
        self.publish_path.is_some() || self.staging_path.is_some()
    }
}

/// Boundary to the kubelet's directories.
pub trait KubeletDirs: Send + Sync {
    /// What the kubelet attempted for `volume` of the pod with `pod_uid`.
    fn mount_attempt(&self, pod_uid: &str, volume: &CsiVolume) -> MountAttempt;
}

/// The real kubelet root directory.
#[derive(Debug, Clone)]
pub struct KubeletRoot {
    root: PathBuf,
}

impl KubeletRoot {
    /// The kubelet root at `root` (usually `/var/lib/kubelet`).
    pub fn new(root: impl Into<PathBuf>) -> KubeletRoot {
        KubeletRoot { root: root.into() }
    }

    /// The pod's directory for a CSI volume.
    pub fn pod_volume_dir(&self, pod_uid: &str, dir_name: &str) -> PathBuf {
        self.root
            .join("pods")
            .join(pod_uid)
            .join("volumes")
            .join("kubernetes.io~csi")
            .join(dir_name)
    }

    /// The per-volume directory holding `globalmount` for a driver and volume handle.
    pub fn staging_dir(&self, driver: &str, volume_handle: &str) -> PathBuf {
        let digest = hex::encode(Sha256::digest(volume_handle.as_bytes()));
        self.root
            .join("plugins")
            .join("kubernetes.io")
            .join("csi")
            .join(driver)
            .join(digest)
    }

    /// For a volume of `driver` with `volume_handle`, used by the pod `pod_uid` under
    /// `dir_name`: the staging directory (holding `globalmount`) and the pod's volume directory
    /// (holding `mount`) below the kubelet root `root`, as the kubelet lays them out.
    pub fn volume_dirs(
        root: &Path,
        driver: &str,
        volume_handle: &str,
        pod_uid: &str,
        dir_name: &str,
    ) -> (PathBuf, PathBuf) {
        let k = KubeletRoot::new(root);
        (
            k.staging_dir(driver, volume_handle),
            k.pod_volume_dir(pod_uid, dir_name),
        )
    }

    fn legacy_staging_dir(&self, pv_name: &str) -> PathBuf {
        self.root
            .join("plugins")
            .join("kubernetes.io")
            .join("csi")
            .join("pv")
            .join(pv_name)
    }
}

/// Whether `dir` holds an entry named `name`, from the directory's own listing: a stat of
/// `dir/name` would enter the filesystem mounted there, and a hung mount would hang the agent.
fn listed(dir: &Path, name: &str) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| entries.flatten().any(|e| e.file_name() == name))
}

impl KubeletDirs for KubeletRoot {
    fn mount_attempt(&self, pod_uid: &str, volume: &CsiVolume) -> MountAttempt {
        // Safe names only: a name with a separator could point outside the kubelet's tree.
        let unsafe_name = |s: &str| s.is_empty() || s.contains('/') || s == "." || s == "..";
        if unsafe_name(pod_uid) || unsafe_name(&volume.dir_name) || unsafe_name(&volume.driver) {
            return MountAttempt::default();
        }
        let pod_dir = self.pod_volume_dir(pod_uid, &volume.dir_name);
        let mount = pod_dir.join("mount");
        let publish_path =
            (listed(&pod_dir, "mount") || listed(&pod_dir, "vol_data.json")).then_some(mount);
        let staging_path = if volume.inline {
            None
        } else {
            [
                self.staging_dir(&volume.driver, &volume.volume_handle),
                self.legacy_staging_dir(&volume.dir_name),
            ]
            .into_iter()
            .find_map(|dir| {
                let global = dir.join("globalmount");
                (listed(&dir, "globalmount") || listed(&dir, "vol_data.json")).then_some(global)
            })
        };
        MountAttempt {
            publish_path,
            staging_path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vol(inline: bool) -> CsiVolume {
        CsiVolume {
            name: "data".into(),
            driver: "d.example.com".into(),
            volume_handle: "vol-1".into(),
            dir_name: "pv-1".into(),
            inline,
        }
    }

    #[test]
    fn nothing_attempted_without_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let root = KubeletRoot::new(tmp.path());
        assert!(!root.mount_attempt("uid", &vol(false)).attempted());
        // The pod's volume directory alone (without mount or vol_data.json) is no attempt.
        std::fs::create_dir_all(root.pod_volume_dir("uid", "pv-1")).unwrap();
        assert!(!root.mount_attempt("uid", &vol(false)).attempted());
    }

    #[test]
    fn publish_and_stage_are_seen() {
        let tmp = tempfile::tempdir().unwrap();
        let root = KubeletRoot::new(tmp.path());
        let pod_dir = root.pod_volume_dir("uid", "pv-1");
        std::fs::create_dir_all(pod_dir.join("mount")).unwrap();
        let a = root.mount_attempt("uid", &vol(false));
        assert_eq!(a.publish_path, Some(pod_dir.join("mount")));
        assert_eq!(a.staging_path, None);

        let staging = root.staging_dir("d.example.com", "vol-1");
        assert!(staging.ends_with(hex::encode(Sha256::digest(b"vol-1"))));
        std::fs::create_dir_all(staging.join("globalmount")).unwrap();
        let a = root.mount_attempt("uid", &vol(false));
        assert_eq!(a.staging_path, Some(staging.join("globalmount")));
        // Inline volumes are never staged.
        assert_eq!(root.mount_attempt("uid", &vol(true)).staging_path, None);
    }

    #[test]
    fn failed_stage_counts_as_attempted() {
        let tmp = tempfile::tempdir().unwrap();
        let root = KubeletRoot::new(tmp.path());
        let staging = root.staging_dir("d.example.com", "vol-1");
        std::fs::create_dir_all(&staging).unwrap();
        std::fs::write(staging.join("vol_data.json"), "{}").unwrap();
        let a = root.mount_attempt("uid", &vol(false));
        assert!(a.attempted());
        assert_eq!(a.publish_path, None);
    }

    #[test]
    fn path_escapes_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = KubeletRoot::new(tmp.path());
        std::fs::create_dir_all(tmp.path().join("pods")).unwrap();
        assert!(!root.mount_attempt("..", &vol(false)).attempted());
        let mut v = vol(false);
        v.dir_name = "../x".into();
        assert!(!root.mount_attempt("uid", &v).attempted());
    }
}
