//! The metrics endpoints of the components `up` starts: stable ports derived from one base port
//! (the monitor gets the base, the agent of node N gets base + N), checked before anything
//! starts, printed and written to `<dir>/endpoints.json` (component name → URL of its metrics).
//! With base 0 (free ports) each component binds port 0 itself and `up` reads the address it
//! bound from its log: a port found free here and let go for the component could be taken by
//! anything on the machine in between, and then the component failed with "Address already in
//! use".

use crate::failure::Context as _;
use crate::failure::{Result, bail};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use crate::up::children::Component;

/// File (in the state dir) naming each component's metrics URL.
pub const FILE: &str = "endpoints.json";

/// How long a component that binds a free port has to say which one.
const BIND_WAIT: Duration = Duration::from_secs(30);

/// The metrics address of every component `up` starts, besides the API server.
#[derive(Debug)]
pub struct MetricsPorts {
    /// (component name, address), the monitor first; port 0 until the component has bound one.
    entries: Vec<(String, SocketAddr)>,
}

/// The base port when `--metrics-port` is not given: the one after the API server's port, or
/// 0 (free ports) when the API server's port is picked freely too.
pub fn default_base(listen: &str) -> u16 {
    match listen.parse::<SocketAddr>() {
        Ok(addr) if addr.port() != 0 => addr.port().saturating_add(1),
        _ => 0,
    }
}

impl MetricsPorts {
    /// Assigns ports from `base` (0: free ports) to the monitor, the agents of `nodes` and the
    /// `extra` components after them (`remediate`), and refuses a port that is taken, naming it.
    pub fn plan_with(base: u16, nodes: &[String], extra: &[&str]) -> Result<MetricsPorts> {
        let names = std::iter::once("monitor".to_string())
            .chain(nodes.iter().map(|n| format!("agent-{n}")))
            .chain(extra.iter().map(|e| e.to_string()));
        let mut entries = Vec::new();
        for (offset, name) in names.enumerate() {
            let port = if base == 0 {
                0
            } else {
                let port = u16::try_from(usize::from(base) + offset)
                    .ok()
                    .with_context(|| {
                        format!("--metrics-port {base} leaves no port for {name} (past 65535)")
                    })?;
                check_free(port, &name, base, offset)?;
                port
            };
            entries.push((name, SocketAddr::from((Ipv4Addr::LOCALHOST, port))));
        }
        Ok(MetricsPorts { entries })
    }

    /// The `--http-endpoint` value of a component (port 0 when it picks a free one).
    pub fn http_endpoint(&self, component: &str) -> Result<String> {
        self.entries
            .iter()
            .find(|(n, _)| n == component)
            .map(|(_, a)| a.to_string())
            .with_context(|| format!("no metrics port was planned for {component}"))
    }

    /// Learns the address of every started component that was told to bind port 0, from the
    /// line its endpoint server logs; fails when one exits or stays silent for too long.
    pub async fn learn_bound(&mut self, components: &mut [Component]) -> Result<()> {
        for (name, addr) in self.entries.iter_mut().filter(|(_, a)| a.port() == 0) {
            if let Some(c) = components.iter_mut().find(|c| c.name == *name) {
                *addr = c.bound_http(BIND_WAIT).await?;
            }
        }
        Ok(())
    }

    /// Component name → metrics URL, the API server's (`server` is its base URL) included.
    pub fn urls(&self, server: &str) -> BTreeMap<String, String> {
        let path = volhealth_daemon::endpoint_server::DEFAULT_METRICS_PATH;
        let mut urls = BTreeMap::from([(
            "apiserver".to_string(),
            format!("{}{path}", server.trim_end_matches('/')),
        )]);
        for (name, addr) in &self.entries {
            urls.insert(name.clone(), format!("http://{addr}{path}"));
        }
        urls
    }

    /// Writes [`MetricsPorts::urls`] as JSON to `<root>/endpoints.json`.
    pub fn write(&self, root: &Path, server: &str) -> Result<()> {
        let path = root.join(FILE);
        let mut text =
            serde_json::to_string_pretty(&self.urls(server)).context("encoding the endpoints")?;
        text.push('\n');
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }
}

/// Refuses a planned port that something already listens on, naming the component.
fn check_free(port: u16, name: &str, base: u16, offset: usize) -> Result<()> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match TcpListener::bind(addr) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => bail!(
            "port {port} (the metrics endpoint of {name}, --metrics-port {base} + {offset}) is already in use; pick another base with --metrics-port PORT, or 0 for free ports"
        ),
        Err(e) => Err(e).with_context(|| format!("cannot listen on {addr} for {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("node-{i}")).collect()
    }

    #[test]
    fn the_default_base_follows_the_api_server() {
        assert_eq!(default_base("127.0.0.1:6443"), 6444);
        assert_eq!(default_base("127.0.0.1:0"), 0);
        assert_eq!(default_base("bogus"), 0);
    }

    #[test]
    fn ports_derive_from_the_base_and_a_taken_one_is_named() {
        let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        // The agent of node-2 would get the taken port.
        let err = MetricsPorts::plan_with(port - 2, &nodes(3), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("port {port}")) && err.contains("agent-node-2"),
            "{err}"
        );
        assert!(err.contains("--metrics-port"), "{err}");

        let plan = MetricsPorts::plan_with(0, &nodes(2), &[]).unwrap();
        let urls = plan.urls("http://127.0.0.1:6443");
        assert_eq!(urls["apiserver"], "http://127.0.0.1:6443/metrics");
        assert_eq!(
            urls.keys().collect::<Vec<_>>(),
            ["agent-node-1", "agent-node-2", "apiserver", "monitor"]
        );
        assert_eq!(
            urls["monitor"],
            format!("http://{}/metrics", plan.http_endpoint("monitor").unwrap())
        );
        assert!(MetricsPorts::plan_with(65535, &nodes(1), &[]).is_err());
    }

    #[test]
    fn free_ports_are_bound_by_the_component() {
        let plan = MetricsPorts::plan_with(0, &nodes(3), &[]).unwrap();
        for c in ["monitor", "agent-node-1", "agent-node-3"] {
            assert_eq!(plan.http_endpoint(c).unwrap(), "127.0.0.1:0");
        }
    }
}
