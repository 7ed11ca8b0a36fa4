//! Conditions the unit tests of several modules build.

use crate::StorageHealthCondition;

/// A storage condition, scoped to `access_mode` when given.
pub(crate) fn storage_condition(
    status: &str,
    reason: &str,
    access_mode: Option<&str>,
) -> StorageHealthCondition {
    StorageHealthCondition {
        status: status.into(),
        reason: reason.into(),
        access_mode: access_mode.map(Into::into),
        ..Default::default()
    }
}
