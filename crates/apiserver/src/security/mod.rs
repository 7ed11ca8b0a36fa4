//! Who may do what: authentication, authorization (Node, RBAC), impersonation, TLS and kubeconfigs.

pub mod authz;
pub mod kubeconfig;
pub mod tls;
