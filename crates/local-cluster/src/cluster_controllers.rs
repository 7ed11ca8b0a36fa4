//! `volhealth cluster-controllers` (hidden; `up` runs it): the smallest stand-ins for
//! external-provisioner, the PV controller, kube-scheduler and the kubelet's volume manager, so
//! that a PVC and a pod a user applies under `up` are provisioned, bound, scheduled, staged and
//! published, and cleaned up when deleted.
//!
//! One process, one level-triggered loop: watches on PVCs, PVs and pods only wake it; each pass
//! reads the current objects and moves every one of them one step on. A failed step is retried
//! with a per-object backoff, never by exiting.

pub mod backoff;
pub mod kubelet;
pub mod provision;
pub mod schedule;

use crate::failure::Context as _;
use crate::failure::{Result, chain};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How often a pass runs with no watch event (retries whose backoff has run out).
const RESYNC: Duration = Duration::from_secs(2);

/// What the cluster controllers run with: the settings behind `volhealth cluster-controllers`.
#[derive(Debug, Clone)]
pub struct ControllersConfig {
    /// Kubeconfig file (default: KUBECONFIG, else in-cluster, else ~/.kube/config).
    pub kubeconfig: Option<PathBuf>,
    /// The CSI driver's name (the StorageClass provisioner these controllers serve).
    pub driver: String,
    /// The driver's controller plugin, e.g. unix:///run/csi/controller.sock.
    pub controller_endpoint: String,
    /// Each node and its node plugin: `NODE=ENDPOINT`.
    pub nodes: Vec<String>,
    /// Each node's kubelet root directory: `NODE=DIR`.
    pub kubelet_roots: Vec<String>,
}

/// One node these controllers can schedule to and mount on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlugin {
    /// The driver's node plugin endpoint on this node.
    pub endpoint: String,
    /// The node's kubelet root directory.
    pub kubelet_root: PathBuf,
}

/// What every controller needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The driver's name.
    pub driver: String,
    /// Its controller plugin.
    pub controller: String,
    /// Node name → its plugin.
    pub nodes: BTreeMap<String, NodePlugin>,
}

/// The objects one pass works on, read at its start.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Every StorageClass.
    pub classes: Vec<StorageClass>,
    /// Every PVC.
    pub claims: Vec<PersistentVolumeClaim>,
    /// Every PV.
    pub volumes: Vec<PersistentVolume>,
    /// Every pod.
    pub pods: Vec<Pod>,
    /// Every node.
    pub nodes: Vec<Node>,
}

fn pairs(flag: &str, values: &[String]) -> Result<BTreeMap<String, String>> {
    values
        .iter()
        .map(|v| {
            v.split_once('=')
                .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .with_context(|| format!("{flag} {v:?} is not NODE=VALUE"))
        })
        .collect()
}

/// The nodes of `--node` and `--kubelet-root`; every node needs both.
pub fn node_plugins(nodes: &[String], roots: &[String]) -> Result<BTreeMap<String, NodePlugin>> {
    let endpoints = pairs("--node", nodes)?;
    let mut roots = pairs("--kubelet-root", roots)?;
    endpoints
        .into_iter()
        .map(|(node, endpoint)| {
            let root = roots
                .remove(&node)
                .with_context(|| format!("--node {node} has no --kubelet-root {node}=DIR"))?;
            Ok((
                node,
                NodePlugin {
                    endpoint,
                    kubelet_root: PathBuf::from(root),
                },
            ))
        })
        .collect()
}

async fn snapshot(client: &kube::Client) -> Result<Snapshot> {
    Ok(Snapshot {
        classes: list_all::<StorageClass>(client, "StorageClasses").await?,
        claims: list_all::<PersistentVolumeClaim>(client, "PersistentVolumeClaims").await?,
        volumes: list_all::<PersistentVolume>(client, "PersistentVolumes").await?,
        pods: list_all::<Pod>(client, "Pods").await?,
        nodes: list_all::<Node>(client, "Nodes").await?,
    })
}

/// Every object of kind `K` in the cluster, in every namespace (`kinds` names them for the error).
async fn list_all<K>(client: &kube::Client, kinds: &str) -> Result<Vec<K>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let list = Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing {kinds}"))?;
    Ok(list.items)
}

/// A stream that yields once per change of any PVC, PV or pod (and once per watch restart).
fn changes(client: &kube::Client) -> impl futures::Stream<Item = ()> + Send + 'static {
    use kube::runtime::WatchStreamExt as _;
    let cfg = watcher::Config::default();
    let claims = watcher(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        cfg.clone(),
    )
    .default_backoff()
    .map(|_| ());
    let volumes = watcher(Api::<PersistentVolume>::all(client.clone()), cfg.clone())
        .default_backoff()
        .map(|_| ());
    let pods = watcher(Api::<Pod>::all(client.clone()), cfg)
        .default_backoff()
        .map(|_| ());
    futures::stream::select_all([claims.boxed(), volumes.boxed(), pods.boxed()])
}

/// One pass of every controller over `snap`.
async fn pass(
    client: &kube::Client,
    cfg: &Config,
    snap: &Snapshot,
    retries: &mut backoff::Retries,
) {
    let now = tokio::time::Instant::now();
    provision::provision(client, cfg, snap, retries, now).await;
    provision::bind(client, snap).await;
    provision::reclaim(client, cfg, snap, retries, now).await;
    schedule::schedule(client, cfg, snap).await;
    kubelet::mount(client, cfg, snap, retries, now).await;
    kubelet::unmount(cfg, snap, retries, now).await;
}

/// Runs the controllers until SIGINT or SIGTERM.
pub async fn run(args: ControllersConfig) -> crate::Result<()> {
    run_until_stopped(args)
        .await
        .map_err(crate::Error::ClusterControllers)
}

async fn run_until_stopped(args: ControllersConfig) -> Result<()> {
    let cfg = Config {
        driver: args.driver,
        controller: args.controller_endpoint,
        nodes: node_plugins(&args.nodes, &args.kubelet_roots)?,
    };
    volhealth_daemon::in_progress::name_run_loop(format!(
        "the cluster controllers of driver {}",
        cfg.driver
    ));
    // Watched from here on: SIGTERM while connecting still ends the process, bounded and logged.
    let stop = volhealth_daemon::shutdown_signal::sigint_or_sigterm();
    let client = crate::connection::connect(args.kubeconfig.as_deref(), Duration::from_secs(10))
        .await?
        .client;
    tracing::info!(
        driver = %cfg.driver,
        nodes = ?cfg.nodes.keys().collect::<Vec<_>>(),
        "provisioner, PV controller, scheduler and kubelet volume role running"
    );
    let mut changes = Box::pin(changes(&client));
    let mut retries = backoff::Retries::default();
    tokio::pin!(stop);
    loop {
        match snapshot(&client).await {
            Ok(snap) => pass(&client, &cfg, &snap, &mut retries).await,
            Err(e) => tracing::warn!("reading the cluster: {}", chain(&e)),
        }
        tokio::select! {
            _ = &mut stop => break,
            _ = changes.next() => {
                // Let a burst of events (an apply of several objects) settle into one pass.
                tokio::time::sleep(Duration::from_millis(50)).await;
                while let Some(Some(())) = futures::FutureExt::now_or_never(changes.next()) {}
            }
            _ = tokio::time::sleep(RESYNC) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_needs_an_endpoint_and_a_kubelet_root() {
        let nodes = node_plugins(
            &["n1=unix:///a.sock".into()],
            &["n1=/k/n1".into(), "n2=/k/n2".into()],
        )
        .unwrap();
        assert_eq!(nodes["n1"].endpoint, "unix:///a.sock");
        assert_eq!(nodes["n1"].kubelet_root, PathBuf::from("/k/n1"));
        let err = node_plugins(&["n1=unix:///a.sock".into()], &[]).unwrap_err();
        assert!(err.to_string().contains("--kubelet-root n1=DIR"), "{err}");
        assert!(node_plugins(&["n1".into()], &[]).is_err());
    }
}
