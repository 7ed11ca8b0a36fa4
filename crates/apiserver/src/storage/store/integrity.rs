//! Telling a damaged database from other failures, so that the operator learns which file is
//! corrupt instead of reading a bare SQLite error.

use crate::errors::Error;
use rusqlite::ErrorCode;
use std::path::Path;

/// Refuses a database file that exists but is empty: SQLite would take it for a new database
/// and start over, silently, on a store that was truncated. A file that does not exist yet is
/// new and fine.
pub(super) fn refuse_truncated(path: &Path) -> Result<(), Error> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() == 0 => Err(Error::Corrupt {
            path: path.display().to_string(),
            reason: "the file is empty (0 bytes), as if truncated".into(),
        }),
        _ => Ok(()),
    }
}

/// Turns SQLite's "not a database" and "malformed" failures, and stored JSON that does not
/// decode, into [`Error::Corrupt`] naming `path`; other errors pass unchanged.
pub(super) fn name_corruption(path: &Path, e: Error) -> Error {
    let path = path.display().to_string();
    match e {
        Error::Store {
            what,
            source: rusqlite::Error::SqliteFailure(f, msg),
        } if matches!(f.code, ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            Error::Corrupt {
                path,
                reason: format!("{what}: {}", msg.unwrap_or_else(|| f.to_string())),
            }
        }
        Error::Json { what, source } => Error::Corrupt {
            path,
            reason: format!("{what}: {source}"),
        },
        other => other,
    }
}
