//! Who each component of `volhealth up` is, and the kubeconfig that says so: the admin
//! (`<dir>/kubeconfig`) and every node agent present client certificates signed by the API
//! server's CA (CN `volhealth-admin` in `system:masters`; CN `system:node:NAME` in
//! `system:nodes`), the monitor presents its service account's token from `tokens.csv`, as
//! service accounts authenticate with tokens. Every kubeconfig trusts the server's CA.

use super::layout::{Layout, Tokens};
use crate::failure::Context as _;
use crate::failure::Result;
use volhealth_apiserver::kubeconfig::{self, Kubeconfig};
use volhealth_apiserver::tls;

/// The admin's user name.
pub const ADMIN_USER: &str = "volhealth-admin";
/// The admin's group.
pub const ADMIN_GROUP: &str = "system:masters";

/// Writes the admin's, the monitor's and every node's kubeconfig for `server`, issuing client
/// certificates from the CA in the API server's data directory.
pub fn write_kubeconfigs(layout: &Layout, server: &str, tokens: &Tokens) -> Result<()> {
    let data = layout.apiserver_data();
    let issue = |user: &str, groups: &[&str]| {
        tls::issue_client_cert(&data, user, groups)
            .with_context(|| format!("issuing the client certificate of {user}"))
    };
    let admin = issue(ADMIN_USER, &[ADMIN_GROUP])?;
    let ca = admin.ca_pem.clone();
    kubeconfig::write(
        &layout.kubeconfig(),
        &Kubeconfig::with_client_cert(server, Some(&ca), admin),
    )
    .context("writing the admin kubeconfig")?;
    kubeconfig::write(
        &layout.monitor_kubeconfig(),
        &Kubeconfig::with_token(server, Some(&ca), &tokens.monitor),
    )
    .context("writing the monitor's kubeconfig")?;
    kubeconfig::write(
        &layout.remediate_kubeconfig(),
        &Kubeconfig::with_token(server, Some(&ca), &tokens.remediate),
    )
    .context("writing the remediation controller's kubeconfig")?;
    kubeconfig::write(
        &layout.extender_kubeconfig(),
        &Kubeconfig::with_token(server, Some(&ca), &tokens.extender),
    )
    .context("writing the scheduler extender's kubeconfig")?;
    for (node, _) in &tokens.nodes {
        let user = volhealth_model::identity::node_user(node);
        let cert = issue(&user, &[volhealth_model::identity::NODES_GROUP])?;
        kubeconfig::write(
            &layout.node_kubeconfig(node),
            &Kubeconfig::with_client_cert(server, Some(&ca), cert),
        )
        .with_context(|| format!("writing the kubeconfig of {node}"))?;
    }
    Ok(())
}
