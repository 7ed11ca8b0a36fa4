//! The host's mount table (`/proc/<pid>/mountinfo`): which paths are mounted, on which device,
//! with which per-mount and superblock options.
//!
//! Reading it never touches a mounted filesystem, so a hung mount cannot hold it up.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One line of mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Device number of the filesystem (field 3, `MAJ:MIN`).
    pub major: u32,
    /// Minor part of the device number.
    pub minor: u32,
    /// Where it is mounted (field 5, octal escapes decoded).
    pub mount_point: PathBuf,
    /// Per-mount options (field 6), e.g. `rw,relatime`.
    pub mount_options: String,
    /// Filesystem type (first field after ` - `).
    pub fs_type: String,
    /// Mount source (second field after ` - `), e.g. `/dev/sdb1` or `10.0.0.5:/export`.
    pub source: String,
    /// Superblock options (third field after ` - `).
    pub super_options: String,
}

impl Mount {
    /// The per-mount options say read-only.
    pub fn mount_read_only(&self) -> bool {
        has_option(&self.mount_options, "ro")
    }

    /// The filesystem itself (its superblock) is read-only.
    pub fn super_read_only(&self) -> bool {
        has_option(&self.super_options, "ro")
    }

    /// The NFS server of a network filesystem mount: the host of `server:/export`, or the
    /// superblock's `addr=`; `None` for other filesystems.
    pub fn nfs_server(&self) -> Option<String> {
        if !self.fs_type.starts_with("nfs") {
            return None;
        }
        let host = match self.source.strip_prefix('[') {
            // [fd00::1]:/export
            Some(rest) => rest.split_once(']').map(|(h, _)| h),
            None => self.source.rsplit_once(":/").map(|(h, _)| h),
        };
        host.map(str::to_string)
            .filter(|h| !h.is_empty())
            .or_else(|| {
                self.super_options
                    .split(',')
                    .find_map(|o| o.strip_prefix("addr="))
                    .map(str::to_string)
            })
    }
}

fn has_option(options: &str, name: &str) -> bool {
    options.split(',').any(|o| o == name)
}

/// The mounts of one mountinfo snapshot, by mount point (the last mount on a path wins, as it
/// is the one a lookup of the path reaches).
#[derive(Debug, Clone, Default)]
pub struct MountTable {
    by_point: HashMap<PathBuf, Mount>,
}

impl MountTable {
    /// Parses mountinfo text; malformed lines are skipped.
    pub fn parse(text: &str) -> MountTable {
        let mut by_point = HashMap::new();
        for mount in text.lines().filter_map(parse_line) {
            by_point.insert(mount.mount_point.clone(), mount);
        }
        MountTable { by_point }
    }

    /// Reads and parses a mountinfo file.
    pub fn read(path: &Path) -> std::io::Result<MountTable> {
        Ok(MountTable::parse(&std::fs::read_to_string(path)?))
    }

    /// The mount whose mount point is exactly `path`.
    pub fn get(&self, path: &Path) -> Option<&Mount> {
        self.by_point.get(path)
    }

    /// Every mount.
    pub fn mounts(&self) -> impl Iterator<Item = &Mount> {
        self.by_point.values()
    }

    /// How many mount points.
    pub fn len(&self) -> usize {
        self.by_point.len()
    }

    /// No mounts at all.
    pub fn is_empty(&self) -> bool {
        self.by_point.is_empty()
    }
}

/// One line: `ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER`.
fn parse_line(line: &str) -> Option<Mount> {
    let (before, after) = line.split_once(" - ")?;
    let fields: Vec<&str> = before.split(' ').collect();
    if fields.len() < 6 {
        return None;
    }
    let (major, minor) = fields[2].split_once(':')?;
    let mut tail = after.split(' ');
    let fs_type = tail.next()?;
    let source = tail.next()?;
    let super_options = tail.next().unwrap_or("");
    Some(Mount {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        mount_point: PathBuf::from(unescape(fields[4])),
        mount_options: fields[5].to_string(),
        fs_type: unescape(fs_type),
        source: unescape(source),
        super_options: super_options.to_string(),
    })
}

/// Decodes the kernel's `\NNN` octal escapes (space, tab, newline, backslash).
pub fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
45 22 7:0 / /var/lib/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount rw,relatime shared:30 - ext4 /dev/loop0 ro
46 22 7:0 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv\\0401/mount rw,relatime shared:30 master:2 - ext4 /dev/loop0 ro
47 22 0:52 / /var/lib/kubelet/pods/u2/volumes/kubernetes.io~csi/pv2/mount rw,relatime - nfs4 10.0.0.5:/export rw,vers=4.1,addr=10.0.0.5
48 22 0:53 / /mnt/v6 rw - nfs [fd00::1]:/e rw
bad line
";

    #[test]
    fn fields_are_read_relative_to_the_separator() {
        let t = MountTable::parse(SAMPLE);
        assert_eq!(t.len(), 5);
        let publish = t
            .get(Path::new(
                "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv 1/mount",
            ))
            .unwrap();
        // Two optional fields (shared:, master:) do not shift the fields after ` - `.
        assert_eq!((publish.major, publish.minor), (7, 0));
        assert_eq!(publish.fs_type, "ext4");
        assert_eq!(publish.source, "/dev/loop0");
        assert!(!publish.mount_read_only());
        assert!(publish.super_read_only());
        let root = t.get(Path::new("/")).unwrap();
        assert!(!root.super_read_only(), "errors=remount-ro is not ro");
    }

    #[test]
    fn nfs_servers() {
        let t = MountTable::parse(SAMPLE);
        let nfs = t
            .get(Path::new(
                "/var/lib/kubelet/pods/u2/volumes/kubernetes.io~csi/pv2/mount",
            ))
            .unwrap();
        assert_eq!(nfs.nfs_server().as_deref(), Some("10.0.0.5"));
        let v6 = t.get(Path::new("/mnt/v6")).unwrap();
        assert_eq!(v6.nfs_server().as_deref(), Some("fd00::1"));
        assert_eq!(t.get(Path::new("/")).unwrap().nfs_server(), None);
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape("a\\040b\\011c\\012d\\134e"), "a b\tc\nd\\e");
        assert_eq!(unescape("trailing\\04"), "trailing\\04");
        assert_eq!(unescape("\\999"), "\\999");
    }
}
