//! The metrics endpoints of the components `up` starts: stable ports derived from one base port
//! (the monitor gets the base, the agent of node N gets base + N), checked before anything
//! starts, printed and written to `<dir>/endpoints.json` (component name → URL of its metrics).
//! Each planned port stays bound here until its component is about to start, so two components
//! never get the same free port and nothing else on the machine takes one in between.

use anyhow::Context as _;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Mutex;

/// File (in the state dir) naming each component's metrics URL.
pub const FILE: &str = "endpoints.json";

/// The metrics address of every component `up` starts, besides the API server.
#[derive(Debug)]
pub struct MetricsPorts {
    /// (component name, address), the monitor first.
    entries: Vec<(String, SocketAddr)>,
    /// The listeners holding the ports of components not started yet, by component name.
    held: Mutex<BTreeMap<String, TcpListener>>,
}

/// The base port when `--metrics-port` is not given: the one after the API server's port, or
/// 0 (free ports) when the API server's port is picked freely too.
pub fn default_base(listen: &str) -> u16 {
    match listen.parse::<SocketAddr>() {
        Ok(addr) if addr.port() != 0 => addr.port().saturating_add(1),
        _ => 0,
    }
}

/// Where free ports are looked for when the kernel's ephemeral range cannot be read.
const FREE_PORTS_BELOW: u16 = 32768;
/// The lowest port looked at for a free one.
const FREE_PORTS_FROM: u16 = 10000;
/// How many ports of the range are tried before falling back to port 0.
const FREE_PORT_TRIES: usize = 200;

/// The first port of the kernel's ephemeral range, from which it picks the source ports of
/// outgoing connections and the ports of `bind(0)`.
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(FREE_PORTS_BELOW)
}

/// A free loopback port and the listener that holds it. It is looked for below the kernel's
/// ephemeral range: a port is let go just before its component binds it, and in that moment a
/// port of the ephemeral range can become the source port of any connection on the machine
/// (a port found with `bind(0)` lost that race now and then: "Address already in use" in the
/// component). Port 0 is the fallback when nothing below the range is free.
fn free_port() -> anyhow::Result<(u16, TcpListener)> {
    let below = ephemeral_low();
    if below > FREE_PORTS_FROM {
        let span = usize::from(below - FREE_PORTS_FROM);
        let start = rand::random_range(0..span);
        for i in (0..span)
            .cycle()
            .skip(start)
            .take(span.min(FREE_PORT_TRIES))
        {
            let port = FREE_PORTS_FROM + u16::try_from(i).unwrap_or(0);
            if let Ok(l) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
                return Ok((port, l));
            }
        }
    }
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("finding a free port")?;
    let port = l.local_addr().context("finding a free port")?.port();
    Ok((port, l))
}

impl MetricsPorts {
    /// Assigns ports from `base` (0: free ports) and refuses a port that is taken, naming it.
    pub fn plan(base: u16, nodes: &[String]) -> anyhow::Result<MetricsPorts> {
        MetricsPorts::plan_with(base, nodes, &[])
    }

    /// [`MetricsPorts::plan`] with more components after the agents (`remediate`).
    pub fn plan_with(base: u16, nodes: &[String], extra: &[&str]) -> anyhow::Result<MetricsPorts> {
        let names = std::iter::once("monitor".to_string())
            .chain(nodes.iter().map(|n| format!("agent-{n}")))
            .chain(extra.iter().map(|e| e.to_string()));
        let mut entries = Vec::new();
        let mut held = BTreeMap::new();
        for (offset, name) in names.enumerate() {
            let (port, listener) = if base == 0 {
                free_port()?
            } else {
                let port = u16::try_from(usize::from(base) + offset)
                    .ok()
                    .with_context(|| {
                        format!("--metrics-port {base} leaves no port for {name} (past 65535)")
                    })?;
                let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
                match TcpListener::bind(addr) {
                    Ok(l) => (port, l),
                    Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
                        "port {port} (the metrics endpoint of {name}, --metrics-port {base} + {offset}) is already in use; pick another base with --metrics-port PORT, or 0 for free ports"
                    ),
                    Err(e) => {
                        return Err(e)
                            .with_context(|| format!("cannot listen on {addr} for {name}"));
                    }
                }
            };
            held.insert(name.clone(), listener);
            entries.push((name, SocketAddr::from((Ipv4Addr::LOCALHOST, port))));
        }
        Ok(MetricsPorts {
            entries,
            held: Mutex::new(held),
        })
    }

    /// The `--http-endpoint` value of a component, which is about to start: its port is let go
    /// here so that the component can bind it.
    pub fn http_endpoint(&self, component: &str) -> anyhow::Result<String> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(component);
        self.entries
            .iter()
            .find(|(n, _)| n == component)
            .map(|(_, a)| a.to_string())
            .with_context(|| format!("no metrics port was planned for {component}"))
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
    pub fn write(&self, root: &Path, server: &str) -> anyhow::Result<()> {
        let path = root.join(FILE);
        let mut text =
            serde_json::to_string_pretty(&self.urls(server)).context("encoding the endpoints")?;
        text.push('\n');
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
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
        let err = MetricsPorts::plan(port - 2, &nodes(3))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("port {port}")) && err.contains("agent-node-2"),
            "{err}"
        );
        assert!(err.contains("--metrics-port"), "{err}");

        let plan = MetricsPorts::plan(0, &nodes(2)).unwrap();
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
        assert!(MetricsPorts::plan(65535, &nodes(1)).is_err());
    }

    #[test]
    fn free_ports_are_distinct_and_held_until_their_component_starts() {
        let plan = MetricsPorts::plan(0, &nodes(40)).unwrap();
        let addrs: std::collections::BTreeSet<String> = std::iter::once("monitor".to_string())
            .chain(nodes(40).iter().map(|n| format!("agent-{n}")))
            .map(|c| {
                plan.entries
                    .iter()
                    .find(|(n, _)| *n == c)
                    .unwrap()
                    .1
                    .to_string()
            })
            .collect();
        assert_eq!(addrs.len(), 41, "two components share a port: {addrs:?}");
        let below = ephemeral_low();
        assert!(
            plan.entries.iter().all(|(_, a)| a.port() < below),
            "a free port in the ephemeral range, which outgoing connections may take: {addrs:?}"
        );

        let monitor = plan.entries[0].1;
        assert!(
            TcpListener::bind(monitor).is_err(),
            "the monitor's port is free before the monitor starts"
        );
        assert_eq!(plan.http_endpoint("monitor").unwrap(), monitor.to_string());
        TcpListener::bind(monitor).expect("the port is let go for the monitor");
    }
}
