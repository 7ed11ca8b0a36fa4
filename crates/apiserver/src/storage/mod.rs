//! Where objects live: the SQLite store and the bounded watch backlog.

pub(crate) mod backlog;
pub(crate) mod store;
