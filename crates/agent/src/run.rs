//! Wiring: the real Kubernetes client, pod watch, driver discovery, HTTP endpoint and the probe loop.

use crate::agent::{Agent, AgentDeps};
use crate::cluster::{Cluster, KubeCluster};
use crate::config::AgentConfig;
use crate::error::{Error, Result};
use crate::kubelet_dirs::KubeletRoot;
use crate::metrics::Metrics;
use crate::watched::WatchedPod;
use futures::StreamExt;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::task::JoinSet;
use volhealth_daemon::endpoint_server::flag_check;
use volhealth_daemon::{BoundEndpoint, Endpoints};
use volhealth_writer::SystemClock;
use volhealth_writer::intervals::{DriverIntervals, NODE_ANNOTATION};

/// Runs the agent until `shutdown` completes, or until an error that must stop it.
pub async fn run(config: AgentConfig, shutdown: impl Future<Output = ()>) -> Result<()> {
    let metrics = Arc::new(Metrics::default());
    let ready = Arc::new(AtomicBool::new(false));
    let api = ApiFlags::default();
    let mut tasks = JoinSet::new();
    if let Some(addr) = config.http_endpoint {
        let page = metrics.clone();
        let ready_flag = flag_check(ready.clone(), "not ready");
        let unreachable = api.unreachable.clone();
        let dropped = api.field_dropped.clone();
        let endpoints = Endpoints::new(move |format| page.families.encode_as(format))
            .readyz(move || {
                ready_flag()?;
                if unreachable.load(Ordering::Acquire) {
                    return Err("the API server cannot be reached for status writes".into());
                }
                Ok(())
            })
            .readyz_warning(move || {
                dropped.load(Ordering::Acquire).then(|| {
                    "the API server accepts pod.status.volumeHealth / csinode.status.storageHealth writes but drops the fields (its CSIVolumeHealth feature gate is off): nothing shows node-side health".to_string()
                })
            });
        let bound = BoundEndpoint::bind(addr, endpoints).await?;
        // Stopped by `abort_all` below, together with the other tasks.
        tasks.spawn(bound.serve(std::future::pending()));
    }
    let result = run_inner(config, metrics, ready, api, &mut tasks, shutdown).await;
    tasks.abort_all();
    result
}

/// What `/readyz` says of the agent's writes, refreshed every second from its writers.
#[derive(Clone, Default)]
struct ApiFlags {
    /// The last write could not reach the API server (unready).
    unreachable: Arc<AtomicBool>,
    /// The API server drops the health fields (a warning; ready all the same).
    field_dropped: Arc<AtomicBool>,
}

async fn run_inner(
    config: AgentConfig,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    api: ApiFlags,
    tasks: &mut JoinSet<()>,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    tokio::pin!(shutdown);
    if !config.volume_health_enabled {
        tracing::info!("feature gate CSIVolumeHealth is off: no health calls and no status writes");
        ready.store(true, Ordering::Release);
        shutdown.await;
        return Ok(());
    }
    let node = config.node_name.clone();
    let client = client(&config).await?;
    let cluster = KubeCluster::new(client.clone(), &node);
    let node_uid = tokio::select! {
        _ = &mut shutdown => return Ok(()),
        r = verify_node(cluster.as_ref(), &node, config.timeout) => r?,
    };

    let drivers = crate::node_faults::driver_set(&config, &metrics);
    if config.drivers.is_empty() {
        let dir = config.registration_dir();
        tracing::info!("watching {} for CSI driver registrations", dir.display());
        tasks.spawn(crate::discovery::run_registration(
            dir,
            drivers.clone(),
            config.timeout,
            config.registration_poll,
            config.legacy.clone(),
        ));
    } else {
        tasks.spawn(crate::discovery::run_static(
            config.drivers.clone(),
            drivers.clone(),
            config.timeout,
            config.registration_poll,
            config.legacy.clone(),
        ));
    }

    let intervals = Arc::new(DriverIntervals::new(NODE_ANNOTATION, config.interval));
    let _interval_watch = intervals.spawn_watch(kube::Api::all(client.clone()), None);

    let (fatal_tx, mut fatal_rx) = tokio::sync::mpsc::channel::<Error>(1);
    let (store, writer) = reflector::store::<WatchedPod>();
    let watch_config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let stream = watcher(kube::Api::<WatchedPod>::all(client), watch_config)
        .default_backoff()
        .reflect(writer);
    let watch_node = node.clone();
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut failing = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => failing = false,
                Err(e) => {
                    if watch_error_code(&e) == Some(403) {
                        let _ = fatal_tx
                            .send(Error::NodeIdentity {
                                node: watch_node.clone(),
                                detail: format!(
                                    "watching the pods bound to the node was forbidden: {e}"
                                ),
                            })
                            .await;
                        return;
                    }
                    if !failing {
                        tracing::warn!("watching the node's pods: {e}; retrying");
                        failing = true;
                    }
                }
            }
        }
    });
    // A refused watch sends its cause and then drops the store's writer, which also ends
    // `wait_until_ready`; the cause is taken first, whichever of the two is seen first, so the
    // error names the server's answer instead of the dropped writer.
    tokio::select! {
        biased;
        _ = &mut shutdown => return Ok(()),
        Some(e) = fatal_rx.recv() => return Err(e),
        r = store.wait_until_ready() => if let Err(e) = r {
            return Err(fatal_rx.try_recv().unwrap_or_else(|_| Error::Kube {
                action: "watching the node's pods".into(),
                message: e.to_string(),
            }));
        },
    }
    ready.store(true, Ordering::Release);
    tracing::info!(node = %node, interval = ?config.interval, "agent started");

    let agent = Agent::new(AgentDeps {
        node_name: node,
        node_uid,
        cluster,
        pods: Arc::new(store),
        dirs: Arc::new(KubeletRoot::new(config.kubelet_root_dir.clone())),
        drivers,
        clock: Arc::new(SystemClock),
        metrics,
        intervals,
        timeout: config.timeout,
        max_concurrent_probes: config.max_concurrent_probes,
    });
    let readiness = async {
        loop {
            api.unreachable
                .store(agent.api_unreachable(), Ordering::Release);
            api.field_dropped
                .store(agent.drops_field(), Ordering::Release);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    tokio::select! {
        _ = &mut shutdown => Ok(()),
        Some(e) = fatal_rx.recv() => Err(e),
        r = agent.run() => r,
        _ = agent.send_events(std::future::pending()) => Ok(()),
        _ = readiness => Ok(()),
    }
}

fn watch_error_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => match k {
            kube::Error::Api(s) => Some(s.code),
            _ => None,
        },
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

async fn client(config: &AgentConfig) -> Result<kube::Client> {
    let loaded = volhealth_kube_access::client::load(config.kubeconfig.as_deref()).await?;
    check_kubeconfig_user(loaded.kubeconfig_user.as_deref(), &config.node_name)?;
    Ok(loaded.client)
}

/// A kubeconfig whose user is named `system:node:OTHER` says outright that it belongs to another node.
fn check_kubeconfig_user(user: Option<&str>, node: &str) -> Result<()> {
    if let Some(user) = user
        && let Some(other) = volhealth_model::identity::node_of_user(user)
        && other != node
    {
        return Err(Error::NodeIdentity {
            node: node.to_string(),
            detail: format!("the kubeconfig user is {user:?}"),
        });
    }
    Ok(())
}

/// Before any write: a harmless read that the node's credentials are allowed, and the Node must exist.
async fn verify_node(
    cluster: &dyn Cluster,
    node: &str,
    timeout: Duration,
) -> Result<Option<String>> {
    let deadline = tokio::time::Instant::now() + timeout.max(Duration::from_secs(30));
    loop {
        match cluster.get_node(node).await {
            Ok(Some(n)) => return Ok(n.uid().map(str::to_string)),
            Ok(None) => return Err(Error::NodeMissing(node.to_string())),
            Err(e) if e.is_forbidden() => {
                return Err(Error::NodeIdentity {
                    node: node.to_string(),
                    detail: format!("reading nodes/{node}: {e}"),
                });
            }
            Err(e) if e.code.is_some_and(|c| c < 500) || tokio::time::Instant::now() > deadline => {
                return Err(Error::Kube {
                    action: format!("reading nodes/{node}"),
                    message: e.to_string(),
                });
            }
            Err(e) => {
                tracing::warn!("reading nodes/{node}: {e}; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn gate_off_touches_neither_the_cluster_nor_drivers() {
        // A kubeconfig that does not exist and a driver socket that does not exist: any attempt to use them fails.
        let mut config = AgentConfig::new("node-a");
        config.kubeconfig = Some("/nonexistent/kubeconfig".into());
        config.drivers =
            vec![crate::config::parse_driver("d=unix:///nonexistent/csi.sock").unwrap()];
        config.http_endpoint = None;
        config.volume_health_enabled = false;
        let shutdown = tokio::time::sleep(Duration::from_secs(3600));
        run(config, shutdown).await.unwrap();
    }

    #[tokio::test]
    async fn gate_on_uses_the_cluster() {
        let mut config = AgentConfig::new("node-a");
        config.kubeconfig = Some("/nonexistent/kubeconfig".into());
        config.http_endpoint = None;
        let err = run(config, std::future::pending()).await.unwrap_err();
        assert!(matches!(err, Error::KubeConfig(_)), "{err}");
    }

    #[test]
    fn a_kubeconfig_user_of_another_node_is_refused() {
        let yaml = r#"
apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: "system:node:node-b"}}]
clusters: [{name: k, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: "system:node:node-b", user: {token: t}}]
"#;
        let kc: kube::config::Kubeconfig = serde_yaml_from(yaml);
        let user = volhealth_kube_access::client::current_user(&kc);
        assert!(matches!(
            check_kubeconfig_user(user.as_deref(), "node-a"),
            Err(Error::NodeIdentity { .. })
        ));
        assert!(check_kubeconfig_user(user.as_deref(), "node-b").is_ok());
    }

    fn serde_yaml_from(yaml: &str) -> kube::config::Kubeconfig {
        kube::config::Kubeconfig::from_yaml(yaml).unwrap()
    }
}

#[cfg(test)]
mod send_tests {
    /// `volhealth up` spawns agents on its runtime, so the whole agent future must be `Send`.
    #[test]
    fn the_agent_future_can_be_spawned() {
        fn assert_send<T: Send + 'static>(_: &T) {}
        let future = super::run(crate::AgentConfig::new("node-a"), async {});
        assert_send(&future);
    }
}
