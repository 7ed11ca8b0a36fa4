//! Checking the write-ahead log before SQLite opens the store. SQLite ignores a WAL whose header
//! or frames fail their checksums, without a word: the database then opens without whatever the
//! WAL held. This reads the WAL the way SQLite's recovery does (header, then the chain of frame
//! checksums) so the server can say so, and keeps a copy of a WAL that will be ignored.
//!
//! What can be told apart: a header that is not valid (garbage, or overwritten), and a chain of
//! frames that breaks while later frames still carry the header's salts (those frames were
//! written after the broken one, in the same generation, so the break is damage, not a torn
//! last write). What cannot: a broken frame with nothing of its generation after it looks like
//! a commit interrupted by a crash (which loses nothing acknowledged, as `synchronous=FULL`
//! syncs before answering), so it is not reported.

use std::path::{Path, PathBuf};

const HEADER: usize = 32;
const FRAME_HEADER: usize = 24;
const MAGIC_LE: u32 = 0x377f_0682;
const MAGIC_BE: u32 = 0x377f_0683;
const VERSION: u32 = 3_007_000;

/// What SQLite will make of a database's WAL.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wal {
    /// No WAL, or an empty one.
    Absent,
    /// A valid WAL: its `frames` valid frames (up to the last commit) will be applied.
    Valid {
        /// Frames that will be applied.
        frames: usize,
    },
    /// A WAL SQLite will ignore in full or in part: why.
    Ignored(String),
}

/// The WAL file of the database at `db`.
pub(crate) fn path_of(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_be_bytes)
}

/// SQLite's WAL checksum of `data` (a multiple of 8 bytes), continuing from `s`.
fn checksum(big_endian: bool, mut s: (u32, u32), data: &[u8]) -> (u32, u32) {
    for pair in data.chunks_exact(8) {
        let word = |w: &[u8]| {
            let w = <[u8; 4]>::try_from(w).unwrap_or_default();
            if big_endian {
                u32::from_be_bytes(w)
            } else {
                u32::from_le_bytes(w)
            }
        };
        s.0 = s.0.wrapping_add(word(&pair[..4])).wrapping_add(s.1);
        s.1 = s.1.wrapping_add(word(&pair[4..])).wrapping_add(s.0);
    }
    s
}

/// Judges the WAL bytes `b`.
pub(crate) fn inspect(b: &[u8]) -> Wal {
    if b.is_empty() {
        return Wal::Absent;
    }
    if b.len() < HEADER {
        return Wal::Ignored(format!(
            "it is {} bytes, shorter than a WAL header",
            b.len()
        ));
    }
    let magic = u32_at(b, 0);
    if magic != MAGIC_LE && magic != MAGIC_BE {
        return Wal::Ignored("its header does not start with the WAL magic number".into());
    }
    let big_endian = magic == MAGIC_BE;
    if u32_at(b, 4) != VERSION {
        return Wal::Ignored(format!("its header names format {}", u32_at(b, 4)));
    }
    let page = match u32_at(b, 8) {
        1 => 65_536,
        n if (512..=65_536).contains(&n) && n.is_power_of_two() => n as usize,
        n => return Wal::Ignored(format!("its header names page size {n}")),
    };
    let header_sum = checksum(big_endian, (0, 0), &b[..24]);
    if header_sum != (u32_at(b, 24), u32_at(b, 28)) {
        return Wal::Ignored("its header checksum does not match".into());
    }
    let salts = (u32_at(b, 16), u32_at(b, 20));
    let frame_len = FRAME_HEADER + page;
    let frames: Vec<&[u8]> = b[HEADER..].chunks_exact(frame_len).collect();
    let mut sum = header_sum;
    let mut committed = 0;
    for (i, f) in frames.iter().enumerate() {
        let valid = u32_at(f, 0) != 0 && (u32_at(f, 8), u32_at(f, 12)) == salts && {
            let s = checksum(big_endian, sum, &f[..8]);
            let s = checksum(big_endian, s, &f[FRAME_HEADER..]);
            sum = s;
            s == (u32_at(f, 16), u32_at(f, 20))
        };
        if !valid {
            let later = frames[i + 1..]
                .iter()
                .filter(|f| (u32_at(f, 8), u32_at(f, 12)) == salts)
                .count();
            if later > 0 {
                return Wal::Ignored(format!(
                    "frame {} of {} fails its checksum while {later} later frames belong to the \
                     same log: {} frames after the last good commit are dropped",
                    i + 1,
                    frames.len(),
                    frames.len() - committed
                ));
            }
            break;
        }
        if u32_at(f, 4) != 0 {
            committed = i + 1;
        }
    }
    Wal::Valid { frames: committed }
}

/// Checks the WAL of the database at `db` before it is opened: when SQLite will ignore it (all
/// or part of it), logs a warning naming the file and why, and copies it next to the database
/// (`-wal.ignored-UNIXTIME`), since SQLite overwrites or deletes it once the store is open.
/// Answers the judgement.
pub(crate) fn check(db: &Path) -> Wal {
    let wal = path_of(db);
    let bytes = match std::fs::read(&wal) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Wal::Absent,
        Err(e) => {
            tracing::warn!("could not read {} to check it: {e}", wal.display());
            return Wal::Absent;
        }
    };
    let verdict = inspect(&bytes);
    if let Wal::Ignored(why) = &verdict {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut kept = wal.as_os_str().to_owned();
        kept.push(format!(".ignored-{stamp}"));
        let kept = PathBuf::from(kept);
        let copy = match std::fs::write(&kept, &bytes) {
            Ok(()) => format!("a copy is kept as {}", kept.display()),
            Err(e) => format!("keeping a copy as {} failed: {e}", kept.display()),
        };
        tracing::warn!(
            "the write-ahead log {} ({} bytes) is not valid: {why}. SQLite ignores what it does \
             not accept, so changes it held are NOT in the store; {copy}",
            wal.display(),
            bytes.len()
        );
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database and a valid WAL holding `rows` rows, copied aside while the writer is still
    /// open (so nothing was checkpointed); answers (db path, WAL bytes).
    fn valid_wal(dir: &Path, rows: usize) -> (PathBuf, Vec<u8>) {
        let live = dir.join("live.sqlite");
        let conn = rusqlite::Connection::open(&live).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
             CREATE TABLE t (v TEXT);",
        )
        .unwrap();
        for i in 0..rows {
            conn.execute("INSERT INTO t VALUES (?1)", [format!("row {i}")])
                .unwrap();
        }
        let db = dir.join("copy.sqlite");
        std::fs::copy(&live, &db).unwrap();
        let wal = std::fs::read(path_of(&live)).unwrap();
        drop(conn);
        (db, wal)
    }

    fn rows(db: &Path) -> i64 {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap_or(-1)
    }

    #[test]
    fn a_valid_wal_is_applied_and_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let (db, wal) = valid_wal(dir.path(), 5);
        assert!(matches!(inspect(&wal), Wal::Valid { frames } if frames > 0));
        std::fs::write(path_of(&db), &wal).unwrap();
        assert!(matches!(check(&db), Wal::Valid { .. }));
        assert_eq!(rows(&db), 5, "SQLite applies it");
    }

    #[test]
    fn a_garbage_wal_is_reported_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (db, wal) = valid_wal(dir.path(), 5);
        std::fs::write(path_of(&db), vec![0x5a; wal.len()]).unwrap();
        let verdict = check(&db);
        assert!(
            matches!(&verdict, Wal::Ignored(why) if why.contains("magic")),
            "{verdict:?}"
        );
        let kept: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("-wal.ignored-"))
            .collect();
        assert_eq!(kept.len(), 1, "a copy is kept");
        assert_eq!(
            std::fs::read(kept[0].path()).unwrap(),
            vec![0x5a; wal.len()]
        );
        // The premise: SQLite opens it silently without the WAL's rows (the table is gone too).
        assert_eq!(rows(&db), -1);
    }

    #[test]
    fn a_damaged_header_or_a_break_before_later_frames_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let (_, wal) = valid_wal(dir.path(), 20);
        let mut header = wal.clone();
        header[17] ^= 0xff; // salt-1: the header checksum no longer matches
        assert!(matches!(inspect(&header), Wal::Ignored(why) if why.contains("header checksum")));
        let mut first_frame = wal.clone();
        first_frame[HEADER + FRAME_HEADER + 100] ^= 0xff; // page data of frame 1
        assert!(
            matches!(inspect(&first_frame), Wal::Ignored(why) if why.contains("frame 1 of")),
            "{:?}",
            inspect(&first_frame)
        );
        assert!(matches!(inspect(&[1, 2, 3]), Wal::Ignored(_)));
        assert_eq!(inspect(&[]), Wal::Absent);
    }

    #[test]
    fn a_torn_last_frame_is_not_reported() {
        let dir = tempfile::tempdir().unwrap();
        let (_, wal) = valid_wal(dir.path(), 20);
        let page = u32_at(&wal, 8) as usize;
        let frames = (wal.len() - HEADER) / (FRAME_HEADER + page);
        let mut torn = wal.clone();
        let last = HEADER + (frames - 1) * (FRAME_HEADER + page);
        torn[last + FRAME_HEADER + 10] ^= 0xff;
        assert!(
            matches!(inspect(&torn), Wal::Valid { frames: f } if f < frames),
            "{:?}",
            inspect(&torn)
        );
    }
}
