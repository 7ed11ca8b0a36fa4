//! What each verb does: the REST dispatcher, get/list/create/update/patch/delete, bindings, evictions, deletions and watches.

pub(crate) mod binding;
pub(crate) mod deletion;
pub(crate) mod eviction;
pub(crate) mod query;
pub(crate) mod rest;
pub(crate) mod watch;
