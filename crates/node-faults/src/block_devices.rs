//! Which block devices stand under a filesystem, from sysfs: the device with the filesystem's
//! `MAJ:MIN`, its whole disk when it is a partition, and everything it is built on (`slaves/`,
//! recursively: dm, multipath, md), each with its own disk.
//!
//! sysfs is read only when the kernel log has named a device, so a quiet node pays nothing.

use crate::kernel_lines::Subject;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Deepest device stack followed (dm on md on partitions is 3).
const MAX_DEPTH: usize = 8;

/// sysfs, at a root that tests can move.
#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    /// sysfs mounted at `root` (usually `/sys`).
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    /// The sysfs root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The kernel name of the block device `major:minor` (`/sys/dev/block/M:m` links to it).
    pub fn name_of(&self, major: u32, minor: u32) -> Option<String> {
        let link = self.root.join(format!("dev/block/{major}:{minor}"));
        let target = std::fs::read_link(link).ok()?;
        target.file_name().map(|n| n.to_string_lossy().into_owned())
    }

    /// The names of every block device a failure of which hurts the filesystem on
    /// `major:minor`; empty when the number is not a block device (NFS, FUSE, tmpfs).
    pub fn stack_of(&self, major: u32, minor: u32) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if let Some(name) = self.name_of(major, minor) {
            self.collect(&name, 0, &mut out);
        }
        out
    }

    fn collect(&self, name: &str, depth: usize, out: &mut BTreeSet<String>) {
        if depth > MAX_DEPTH || !out.insert(name.to_string()) {
            return;
        }
        let dir = self.root.join("class/block").join(name);
        // A partition's directory sits inside its disk's.
        if dir.join("partition").exists()
            && let Ok(real) = std::fs::canonicalize(&dir)
            && let Some(disk) = real.parent().and_then(Path::file_name)
        {
            let disk = disk.to_string_lossy().into_owned();
            self.collect(&disk, depth + 1, out);
        }
        for lower in list(&dir.join("slaves")) {
            self.collect(&lower, depth + 1, out);
        }
    }

    /// The block device names a kernel line's subject stands for.
    pub fn names_of(&self, subject: &Subject) -> Vec<String> {
        match subject {
            Subject::Device(name) => vec![name.clone()],
            Subject::DevNumber(major, minor) => self.name_of(*major, *minor).into_iter().collect(),
            Subject::Scsi(hctl) => list(
                &self
                    .root
                    .join("class/scsi_device")
                    .join(hctl)
                    .join("device/block"),
            ),
            Subject::NvmeController(controller) => {
                list(&self.root.join("class/nvme").join(controller))
                    .into_iter()
                    .filter(|n| n.starts_with("nvme") && n.contains('n') && n != controller)
                    .filter(|n| n[4..].contains('n'))
                    .collect()
            }
            Subject::IscsiSession(session) => {
                let device = self
                    .root
                    .join("class/iscsi_session")
                    .join(session)
                    .join("device");
                let mut names = Vec::new();
                for target in list(&device).iter().filter(|t| t.starts_with("target")) {
                    for lun in list(&device.join(target)) {
                        names.extend(list(&device.join(target).join(lun).join("block")));
                    }
                }
                names
            }
            Subject::NfsServer(_) => Vec::new(),
        }
    }

    /// The devices `name` is built on directly (`slaves/`).
    pub fn slaves(&self, name: &str) -> Vec<String> {
        list(&self.root.join("class/block").join(name).join("slaves"))
    }

    /// iSCSI sessions that are not logged in: (session, state).
    pub fn failed_iscsi_sessions(&self) -> Vec<(String, String)> {
        let dir = self.root.join("class/iscsi_session");
        list(&dir)
            .into_iter()
            .filter_map(|s| {
                let state = std::fs::read_to_string(dir.join(&s).join("state")).ok()?;
                let state = state.trim().to_string();
                (state != "LOGGED_IN").then_some((s, state))
            })
            .collect()
    }

    /// Whether `name` is a device-mapper device, and of the devices under it, those whose SCSI
    /// state is not `running` (`offline`, `transport-offline`, `blocked`).
    pub fn paths_down(&self, name: &str) -> Option<(usize, Vec<String>)> {
        let dir = self.root.join("class/block").join(name);
        let slaves = list(&dir.join("slaves"));
        if !dir.join("dm").exists() || slaves.is_empty() {
            return None;
        }
        let down = slaves
            .iter()
            .filter(|s| {
                std::fs::read_to_string(self.root.join("class/block").join(s).join("device/state"))
                    .is_ok_and(|state| state.trim() != "running")
            })
            .cloned()
            .collect();
        Some((slaves.len(), down))
    }
}

/// The names in a directory, sorted; empty when it cannot be read.
fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A sysfs tree: sdb with partition sdb1, dm-0 over sdb1 and sdc.
    fn fake_sysfs() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        let dev = r.join("devices/pci/host0/block");
        for d in ["sdb/sdb1", "sdc", "dm-0"] {
            std::fs::create_dir_all(dev.join(d)).unwrap();
        }
        std::fs::write(dev.join("sdb/sdb1/partition"), "1").unwrap();
        std::fs::create_dir_all(dev.join("dm-0/slaves")).unwrap();
        std::fs::create_dir_all(dev.join("dm-0/dm")).unwrap();
        symlink(dev.join("sdb/sdb1"), dev.join("dm-0/slaves/sdb1")).unwrap();
        symlink(dev.join("sdc"), dev.join("dm-0/slaves/sdc")).unwrap();
        std::fs::create_dir_all(dev.join("sdc/device")).unwrap();
        std::fs::write(dev.join("sdc/device/state"), "offline\n").unwrap();
        std::fs::create_dir_all(r.join("class/block")).unwrap();
        std::fs::create_dir_all(r.join("dev/block")).unwrap();
        for (name, path, number) in [
            ("sdb", "sdb", "8:16"),
            ("sdb1", "sdb/sdb1", "8:17"),
            ("sdc", "sdc", "8:32"),
            ("dm-0", "dm-0", "254:0"),
        ] {
            symlink(dev.join(path), r.join("class/block").join(name)).unwrap();
            symlink(dev.join(path), r.join("dev/block").join(number)).unwrap();
        }
        tmp
    }

    #[test]
    fn a_stack_reaches_partitions_disks_and_slaves() {
        let tmp = fake_sysfs();
        let sys = Sysfs::new(tmp.path());
        let names: Vec<String> = sys.stack_of(254, 0).into_iter().collect();
        assert_eq!(names, ["dm-0", "sdb", "sdb1", "sdc"]);
        let names: Vec<String> = sys.stack_of(8, 17).into_iter().collect();
        assert_eq!(names, ["sdb", "sdb1"]);
        assert!(sys.stack_of(0, 52).is_empty());
        assert_eq!(
            sys.names_of(&Subject::DevNumber(254, 0)),
            vec!["dm-0".to_string()]
        );
    }

    #[test]
    fn multipath_paths_down() {
        let tmp = fake_sysfs();
        let sys = Sysfs::new(tmp.path());
        assert_eq!(sys.paths_down("dm-0"), Some((2, vec!["sdc".to_string()])));
        assert_eq!(sys.paths_down("sdb"), None);
    }

    #[test]
    fn iscsi_sessions() {
        let tmp = fake_sysfs();
        let dir = tmp.path().join("class/iscsi_session");
        for (s, state) in [("session1", "LOGGED_IN"), ("session2", "FAILED")] {
            std::fs::create_dir_all(dir.join(s)).unwrap();
            std::fs::write(dir.join(s).join("state"), format!("{state}\n")).unwrap();
        }
        let lun = dir.join("session2/device/target2:0:0/2:0:0:1/block/sdd");
        std::fs::create_dir_all(lun).unwrap();
        let sys = Sysfs::new(tmp.path());
        assert_eq!(
            sys.failed_iscsi_sessions(),
            vec![("session2".to_string(), "FAILED".to_string())]
        );
        assert_eq!(
            sys.names_of(&Subject::IscsiSession("session2".into())),
            vec!["sdd".to_string()]
        );
    }
}
