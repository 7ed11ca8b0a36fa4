//! One request over one connection: connection limits, bodies, the call context, responses and the shared server state.

pub(crate) mod bare_refusal;
pub(crate) mod body;
pub(crate) mod call;
pub(crate) mod connections;
pub(crate) mod response;
pub(crate) mod slots;
pub(crate) mod state;
