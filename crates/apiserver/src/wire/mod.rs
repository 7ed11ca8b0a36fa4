//! How objects travel: protobuf, Table output, discovery, OpenAPI, and the parsed request.

pub(crate) mod discovery;
pub(crate) mod openapi;
pub(crate) mod protobuf;
pub mod request;
pub(crate) mod table;
