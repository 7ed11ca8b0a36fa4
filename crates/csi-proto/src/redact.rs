//! Stand-ins printed by `Debug` in place of `csi_secret` values.

use std::fmt;

/// What a secret field's `Debug` prints instead of its contents.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Redacted {
    /// A secret map: only the number of keys is shown.
    Keys(usize),
    /// A secret repeated field: only the number of items is shown.
    Items(usize),
    /// A secret scalar or message.
    Value,
}

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Redacted::Keys(n) => write!(f, "<redacted {n} keys>"),
            Redacted::Items(n) => write!(f, "<redacted {n} items>"),
            Redacted::Value => f.write_str("<redacted>"),
        }
    }
}
