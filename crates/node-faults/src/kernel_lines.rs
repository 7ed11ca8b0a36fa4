//! What a kernel log line says about storage: which device, controller, session or server it
//! names, and what happened to it.
//!
//! Lines are matched by the text the kernel prints, whatever their facility: lines written to
//! `/dev/kmsg` from user space carry the user facility but read the same.

/// What a line names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// A block device by kernel name (`sdb1`, `loop4`, `dm-3`, `nvme0n1`).
    Device(String),
    /// A block device by number (`254:9`).
    DevNumber(u32, u32),
    /// A SCSI device by `H:C:T:L`.
    Scsi(String),
    /// An NVMe controller (`nvme0`).
    NvmeController(String),
    /// An iSCSI session (`session4`).
    IscsiSession(String),
    /// An NFS server by the name the mount uses.
    NfsServer(String),
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Effect {
    /// I/O failed; the filesystem may still work.
    IoError,
    /// The filesystem went read-only after an error.
    ReadOnly,
    /// The filesystem shut down.
    Shutdown,
    /// The NFS server stopped answering.
    ServerDown,
    /// The NFS server answers again.
    ServerUp,
}

/// A storage event read from one kernel line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelEvent {
    /// What it names.
    pub subject: Subject,
    /// What happened.
    pub effect: Effect,
    /// The line's message, for the condition's message.
    pub line: String,
}

/// The message of a record as `/dev/kmsg` gives it (`PRI,SEQ,TS,FLAGS;MESSAGE`, continuation
/// lines after it), as a syslog line gives it (`<PRI>MESSAGE`), or a bare message.
pub fn message_of(record: &str) -> &str {
    let first = record.lines().next().unwrap_or("");
    if let Some((head, message)) = first.split_once(';')
        && !head.is_empty()
        && head.split(',').next().is_some_and(is_number)
        && head.split(',').count() >= 3
    {
        return message;
    }
    if let Some(rest) = first.strip_prefix('<')
        && let Some((pri, message)) = rest.split_once('>')
        && is_number(pri)
    {
        return message;
    }
    first
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The text up to (not including) the first of `ends`, or to the end.
fn token(s: &str, ends: &[char]) -> String {
    s.split(|c| ends.contains(&c))
        .next()
        .unwrap_or("")
        .to_string()
}

/// Classifies one record or message; `None` for lines that say nothing about storage health.
pub fn classify(record: &str) -> Option<KernelEvent> {
    let message = message_of(record).trim_end();
    let (subject, effect) = match_message(message)?;
    Some(KernelEvent {
        subject,
        effect,
        line: message.to_string(),
    })
}

fn match_message(m: &str) -> Option<(Subject, Effect)> {
    use Effect::*;
    use Subject::*;
    // Buffer cache: "Buffer I/O error on dev sdb1, logical block 0, lost async page write".
    if let Some((_, rest)) = m.split_once("Buffer I/O error on dev ") {
        return named(Device(token(rest, &[',', ' '])), IoError);
    }
    // Block layer: "I/O error, dev sdc, sector 0 op 0x1:(WRITE) …" and the other statuses
    // ("critical medium error, dev …", "timeout error, dev …").
    if let Some((_, rest)) = m.split_once(" error, dev ")
        && rest.contains(", sector")
    {
        return named(Device(token(rest, &[','])), IoError);
    }
    // "block nvme0n1: no available path - failing I/O"
    if let Some(rest) = m.strip_prefix("block ")
        && m.contains("no available path")
    {
        return named(Device(token(rest, &[':'])), IoError);
    }
    if let Some(rest) = m.strip_prefix("EXT4-fs error (device ") {
        return named(Device(token(rest, &[')'])), IoError);
    }
    if let Some(rest) = m.strip_prefix("EXT4-fs (") {
        // A remount someone asked for ("re-mounted <uuid> ro.") is no error: the superblock
        // option is the signal for it.
        if rest.contains("Remounting filesystem read-only") {
            return named(Device(token(rest, &[')'])), ReadOnly);
        }
        return None;
    }
    // jbd2: "Aborting journal on device sdb1-8."
    if let Some(rest) = m.strip_prefix("Aborting journal on device ") {
        let journal = token(rest, &['.', ' ']);
        let device = journal
            .rsplit_once('-')
            .filter(|(_, n)| is_number(n))
            .map(|(d, _)| d.to_string())
            .unwrap_or(journal);
        return named(Device(device), IoError);
    }
    if let Some(rest) = m.strip_prefix("XFS (") {
        let device = Device(token(rest, &[')']));
        let lower = rest.to_ascii_lowercase();
        if lower.contains("shutting down filesystem") || lower.contains("has been shut down") {
            return Some((device, Shutdown));
        }
        if lower.contains("metadata i/o error") || lower.contains("corruption") {
            return Some((device, IoError));
        }
        return None;
    }
    // sunrpc: "nfs: server 10.0.0.5 not responding, still trying" / "…, timed out";
    // "nfs: server 10.0.0.5 OK".
    if let Some(rest) = m.strip_prefix("nfs: server ") {
        let server = token(rest, &[' ']);
        let after = &rest[server.len()..];
        if after.starts_with(" not responding") {
            return named(NfsServer(server), ServerDown);
        }
        if after.trim() == "OK" {
            return named(NfsServer(server), ServerUp);
        }
        return None;
    }
    // SCSI: "sd 6:0:0:0: rejecting I/O to offline device" (or "[sdb] …" after the address).
    if let Some(rest) = m.strip_prefix("sd ")
        && (m.contains("rejecting I/O to offline device") || m.contains("timing out command"))
    {
        let hctl = token(rest, &[':', ' ']);
        let full = token(rest, &[' ']);
        let full = full.trim_end_matches(':').to_string();
        if let Some((_, name)) = rest.split_once(" [")
            && let Some((name, _)) = name.split_once(']')
        {
            return named(Device(name.to_string()), IoError);
        }
        if !hctl.is_empty() {
            return named(Scsi(full), IoError);
        }
    }
    // iSCSI: "session4: session recovery timed out after 120 secs"
    if let Some((session, rest)) = m.split_once(": ")
        && session.starts_with("session")
        && rest.starts_with("session recovery timed out")
    {
        return named(IscsiSession(session.to_string()), IoError);
    }
    // dm-multipath: "device-mapper: multipath: 254:9: Failing path 8:16."
    if let Some(rest) = m.strip_prefix("device-mapper: multipath: ")
        && rest.contains("Failing path")
    {
        let number = token(rest, &[' ']);
        let (major, minor) = number.trim_end_matches(':').split_once(':')?;
        return named(DevNumber(major.parse().ok()?, minor.parse().ok()?), IoError);
    }
    // NVMe: "nvme nvme0: I/O 12 QID 3 timeout, reset controller"
    if let Some(rest) = m.strip_prefix("nvme ")
        && (m.contains("reset controller") || m.contains("timeout"))
    {
        return named(NvmeController(token(rest, &[':'])), IoError);
    }
    None
}

fn named(subject: Subject, effect: Effect) -> Option<(Subject, Effect)> {
    let empty = match &subject {
        Subject::Device(s)
        | Subject::Scsi(s)
        | Subject::NvmeController(s)
        | Subject::IscsiSession(s)
        | Subject::NfsServer(s) => s.is_empty(),
        Subject::DevNumber(..) => false,
    };
    (!empty).then_some((subject, effect))
}

#[cfg(test)]
mod tests {
    use super::Effect::*;
    use super::Subject::*;
    use super::*;

    fn what(line: &str) -> Option<(Subject, Effect)> {
        classify(line).map(|e| (e.subject, e.effect))
    }

    fn dev(name: &str) -> Subject {
        Device(name.to_string())
    }

    #[test]
    fn block_and_filesystem_lines() {
        let cases = [
            (
                "I/O error, dev sdc, sector 0 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2",
                dev("sdc"),
                IoError,
            ),
            (
                "blk_update_request: I/O error, dev loop4, sector 2048 op 0x0:(READ) flags 0x0",
                dev("loop4"),
                IoError,
            ),
            (
                "critical medium error, dev nvme0n1, sector 12 op 0x0:(READ)",
                dev("nvme0n1"),
                IoError,
            ),
            (
                "Buffer I/O error on dev sdb1, logical block 0, lost async page write",
                dev("sdb1"),
                IoError,
            ),
            (
                "EXT4-fs error (device loop1): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0",
                dev("loop1"),
                IoError,
            ),
            (
                "EXT4-fs (sdb1): Remounting filesystem read-only",
                dev("sdb1"),
                ReadOnly,
            ),
            ("Aborting journal on device sdb1-8.", dev("sdb1"), IoError),
            (
                "XFS (sdb1): Corruption of in-memory data (0x8) detected at xfs_trans_cancel+0x1/0x2 (fs/xfs/xfs_trans.c:1). Shutting down filesystem.",
                dev("sdb1"),
                Shutdown,
            ),
            (
                "XFS (dm-3): metadata I/O error in \"xfs_imap_to_bp+0x5c/0xa0\" at daddr 0x80 len 32 error 5",
                dev("dm-3"),
                IoError,
            ),
            (
                "block nvme0n1: no available path - failing I/O",
                dev("nvme0n1"),
                IoError,
            ),
        ];
        for (line, subject, effect) in cases {
            assert_eq!(what(line), Some((subject, effect)), "{line}");
        }
    }

    #[test]
    fn transport_lines() {
        assert_eq!(
            what("nfs: server 10.0.0.5 not responding, still trying"),
            Some((NfsServer("10.0.0.5".into()), ServerDown))
        );
        assert_eq!(
            what("nfs: server nfs.example.com not responding, timed out"),
            Some((NfsServer("nfs.example.com".into()), ServerDown))
        );
        assert_eq!(
            what("nfs: server 10.0.0.5 OK"),
            Some((NfsServer("10.0.0.5".into()), ServerUp))
        );
        assert_eq!(
            what("sd 6:0:0:0: rejecting I/O to offline device"),
            Some((Scsi("6:0:0:0".into()), IoError))
        );
        assert_eq!(
            what("sd 6:0:0:0: [sdc] tag#0 timing out command, waited 180s"),
            Some((dev("sdc"), IoError))
        );
        assert_eq!(
            what("session4: session recovery timed out after 120 secs"),
            Some((IscsiSession("session4".into()), IoError))
        );
        assert_eq!(
            what("device-mapper: multipath: 254:9: Failing path 8:16."),
            Some((DevNumber(254, 9), IoError))
        );
        assert_eq!(
            what("nvme nvme0: I/O 12 QID 3 timeout, reset controller"),
            Some((NvmeController("nvme0".into()), IoError))
        );
    }

    #[test]
    fn harmless_lines_say_nothing() {
        for line in [
            "EXT4-fs (loop1): re-mounted 1ebe45f2-5a78-4c9a-88a0-b626cc4846c8 ro.",
            "EXT4-fs (loop1): mounted filesystem 1ebe45f2 r/w with ordered data mode.",
            "XFS (sdb1): Mounting V5 Filesystem",
            "connection1:0: detected conn error (1020)",
            "nfs: server 10.0.0.5 is fine",
            "loop0: detected capacity change from 0 to 32768",
            "",
        ] {
            assert_eq!(what(line), None, "{line}");
        }
    }

    #[test]
    fn any_facility_and_record_format() {
        // As /dev/kmsg gives records back: facility 1 (user) and 0 (kernel) alike.
        let user =
            "11,1234,5678901,-;I/O error, dev sdc, sector 0 op 0x1:(WRITE)\n SUBSYSTEM=block\n";
        let kernel = "3,1235,5678902,-;I/O error, dev sdc, sector 0 op 0x1:(WRITE)";
        let syslog = "<11>I/O error, dev sdc, sector 0 op 0x1:(WRITE)";
        for record in [user, kernel, syslog] {
            let event = classify(record).unwrap();
            assert_eq!(event.subject, dev("sdc"));
            assert_eq!(event.line, "I/O error, dev sdc, sector 0 op 0x1:(WRITE)");
        }
        // A message that itself holds a ';' keeps it.
        assert_eq!(message_of("nfs: a;b"), "nfs: a;b");
    }
}
