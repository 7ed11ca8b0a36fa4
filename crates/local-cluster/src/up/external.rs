//! `up --driver-endpoint`: the monitor and agents against a CSI driver that `up` did not start.
//!
//! The driver's controller plugin is at `--driver-endpoint`; its node plugin for each node at
//! `--node-endpoint NODE=ENDPOINT` (or at `--driver-endpoint` too). The kubelet would learn the
//! node plugin from the plugin-registration socket that node-driver-registrar serves; `up`
//! serves that socket itself for each node, pointing at the node plugin.

use crate::failure::{Result, ensure};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::failure::Context as _;
use volhealth_csi::registration::registration_server::RegistrationServer;
use volhealth_csi::server::{Serving, SocketOptions, spawn_unix};
use volhealth_driver::registration::{self, RegistrationService};

/// Parses the `--node-endpoint NODE=ENDPOINT` flags; a node named twice is an error.
pub fn node_endpoints(flags: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for f in flags {
        let (node, endpoint) = f
            .split_once('=')
            .filter(|(n, e)| !n.is_empty() && !e.is_empty())
            .with_context(|| format!("--node-endpoint {f:?}: expected NODE=ENDPOINT"))?;
        volhealth_csi::endpoint::parse(endpoint)
            .with_context(|| format!("--node-endpoint {f:?}"))?;
        ensure!(
            out.insert(node.to_string(), endpoint.to_string()).is_none(),
            "--node-endpoint names node {node} twice"
        );
    }
    Ok(out)
}

/// The driver's name, from GetPluginInfo at `endpoint`.
pub async fn driver_name(endpoint: &str, timeout: Duration) -> Result<String> {
    let channel = volhealth_csi::client::connect(endpoint, timeout)
        .await
        .with_context(|| format!("connecting to the driver at --driver-endpoint {endpoint}"))?;
    let info = volhealth_csi::v1::identity_client::IdentityClient::new(channel)
        .get_plugin_info(volhealth_csi::v1::GetPluginInfoRequest {})
        .await
        .with_context(|| format!("GetPluginInfo at --driver-endpoint {endpoint}"))?
        .into_inner();
    ensure!(
        !info.name.is_empty(),
        "the driver at {endpoint} answered GetPluginInfo without a name"
    );
    Ok(info.name)
}

/// Registration sockets served by `up` for an outside driver, stopped together.
#[derive(Default)]
pub struct Registrations {
    serving: Vec<Serving>,
}

impl Registrations {
    /// Serves `<registration_dir>/<driver>-reg.sock`, telling the agent the node plugin is at
    /// `node_endpoint`.
    pub fn serve(
        &mut self,
        registration_dir: PathBuf,
        driver: &str,
        node_endpoint: &str,
    ) -> Result<()> {
        let csi_socket = volhealth_csi::endpoint::parse(node_endpoint)?;
        let socket = registration::socket_path(&registration_dir, driver);
        let endpoint = format!("unix://{}", socket.display());
        let router = tonic::transport::Server::builder().add_service(RegistrationServer::new(
            RegistrationService::new(driver.to_string(), csi_socket),
        ));
        let options = SocketOptions {
            service: "plugin registration",
            ..Default::default()
        };
        self.serving.push(spawn_unix(&endpoint, router, options));
        Ok(())
    }

    /// A registration socket that stopped serving, described.
    pub fn exited(&mut self) -> Option<String> {
        self.serving
            .iter()
            .find(|s| s.is_finished())
            .map(|_| "a plugin-registration socket served by up stopped".to_string())
    }

    /// Stops every socket and waits for them to be removed.
    pub async fn stop_all(&mut self) {
        for serving in self.serving.drain(..) {
            let _ = serving.stop().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_endpoints_are_node_equals_endpoint() {
        let got = node_endpoints(&[
            "n1=unix:///run/a.sock".to_string(),
            "n2=/run/b.sock".to_string(),
        ])
        .expect("parse");
        assert_eq!(
            got.get("n1").map(String::as_str),
            Some("unix:///run/a.sock")
        );
        assert_eq!(got.len(), 2);
        for bad in ["n1", "=unix:///x", "n1=", "n1=tcp://h:1"] {
            assert!(
                node_endpoints(&[bad.to_string()]).is_err(),
                "{bad} accepted"
            );
        }
        let twice = node_endpoints(&["a=/x".into(), "a=/y".into()]).expect_err("twice");
        assert!(twice.to_string().contains("twice"));
    }
}
