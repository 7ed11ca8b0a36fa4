//! A FUSE filesystem with one file, `disk.img`, held in memory, that answers normally, fails
//! every read and write with EIO, or blocks every call until told otherwise. A loop device over
//! the file turns its failures into real kernel I/O errors; its blocking is a hung mount.

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, WriteFlags,
};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, UNIX_EPOCH};

/// What the filesystem does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answers.
    Healthy,
    /// Reads and writes of the file fail with EIO.
    FailIo,
    /// Every call blocks until the mode changes.
    Hang,
}

struct Shared {
    mode: Mutex<Mode>,
    changed: Condvar,
    data: Mutex<Vec<u8>>,
}

/// The switch of a mounted [`FaultFs`].
#[derive(Clone)]
pub struct Switch(Arc<Shared>);

impl Switch {
    /// Sets the mode and wakes blocked calls.
    pub fn set(&self, mode: Mode) {
        *self.0.mode.lock().unwrap() = mode;
        self.0.changed.notify_all();
    }
}

struct FaultFs(Arc<Shared>);

const ROOT: INodeNo = INodeNo::ROOT;
const FILE: INodeNo = INodeNo(2);
const TTL: Duration = Duration::ZERO;

impl FaultFs {
    /// The mode, after waiting out a hang.
    fn mode(&self) -> Mode {
        let mut mode = self.0.mode.lock().unwrap();
        while *mode == Mode::Hang {
            mode = self.0.changed.wait(mode).unwrap();
        }
        *mode
    }

    fn attr(&self, ino: INodeNo) -> FileAttr {
        let (kind, perm, size) = if ino == ROOT {
            (FileType::Directory, 0o755, 0)
        } else {
            (
                FileType::RegularFile,
                0o644,
                self.0.data.lock().unwrap().len() as u64,
            )
        };
        FileAttr {
            ino,
            size,
            blocks: size / 512,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind,
            perm,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }
}

impl Filesystem for FaultFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.mode();
        if parent == ROOT && name == "disk.img" {
            reply.entry(&TTL, &self.attr(FILE), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.mode();
        if ino == ROOT || ino == FILE {
            reply.attr(&TTL, &self.attr(ino));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.mode();
        // Direct I/O: every read and write reaches this filesystem, none is served from cache.
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if self.mode() == Mode::FailIo {
            return reply.error(Errno::EIO);
        }
        let data = self.0.data.lock().unwrap();
        let start = (offset as usize).min(data.len());
        let end = (start + size as usize).min(data.len());
        reply.data(&data[start..end]);
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        bytes: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if self.mode() == Mode::FailIo {
            return reply.error(Errno::EIO);
        }
        let mut data = self.0.data.lock().unwrap();
        let start = offset as usize;
        if start + bytes.len() > data.len() {
            return reply.error(Errno::ENOSPC);
        }
        data[start..start + bytes.len()].copy_from_slice(bytes);
        reply.written(bytes.len() as u32);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _o: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.mode();
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _d: bool, reply: ReplyEmpty) {
        if self.mode() == Mode::FailIo {
            return reply.error(Errno::EIO);
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.mode();
        reply.statfs(1 << 16, 1 << 15, 1 << 15, 16, 14, 4096, 255, 4096);
    }
}

/// A mounted [`FaultFs`]; unmounted on drop (after releasing any hang).
pub struct Mounted {
    /// Where it is mounted.
    pub point: PathBuf,
    /// What it does now.
    pub switch: Switch,
    session: Option<fuser::BackgroundSession>,
}

impl Mounted {
    /// Mounts a filesystem whose `disk.img` holds `image` at `point`.
    pub fn mount(point: &Path, image: Vec<u8>) -> Mounted {
        std::fs::create_dir_all(point).unwrap();
        let shared = Arc::new(Shared {
            mode: Mutex::new(Mode::Healthy),
            changed: Condvar::new(),
            data: Mutex::new(image),
        });
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("faultfs".into()),
            MountOption::Subtype("faultfs".into()),
        ];
        // Several threads, so a call blocked in one does not starve release of the others.
        config.n_threads = Some(4);
        let session = fuser::spawn_mount(FaultFs(shared.clone()), point, &config)
            .unwrap_or_else(|e| panic!("mounting the FUSE test filesystem: {e}"));
        Mounted {
            point: point.to_path_buf(),
            switch: Switch(shared),
            session: Some(session),
        }
    }

    /// The path of its one file.
    pub fn file(&self) -> PathBuf {
        self.point.join("disk.img")
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.switch.set(Mode::Healthy);
        super::unmount(&self.point);
        if let Some(session) = self.session.take() {
            drop(session);
        }
    }
}
