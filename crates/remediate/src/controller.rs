//! The controller loop, first cut: it watches CSINodes, plans with [`Planner`] every tick, and
//! carries out node actions (taint, untaint, cordon) and Events; dry-run, the default, only says
//! what it would do (log and Event). Actions on PVCs and pods are planned and logged but not yet
//! carried out (counted as `result="unsupported"`).

use crate::findings::of_csinode;
use crate::plan::{Planned, Planner, Untaint};
use crate::policy::{Action, Policy};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::time::Duration;
use volhealth_writer::{EventSink, EventType, HealthEvent, KubeEventSink, ObjectRef};

/// Labels of `volhealth_remediation_actions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// `taint`, `untaint`, `cordon`, `annotate`, `event`, `evict` or `webhook`.
    pub action: String,
    /// `success`, `error`, `dry_run` or `unsupported`.
    pub result: String,
}

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// The validated policy.
    pub policy: Policy,
    /// Only say what would be done.
    pub dry_run: bool,
    /// How often rules are evaluated.
    pub tick: Duration,
}

/// The controller's metric family, registered in `registry`.
pub fn actions_family(registry: &mut Registry) -> Family<ActionLabels, Counter> {
    let f = Family::<ActionLabels, Counter>::default();
    registry.register(
        "volhealth_remediation_actions",
        "Remediation actions, by action and result",
        f.clone(),
    );
    f
}

fn action_name(a: &Action) -> &'static str {
    match a {
        Action::Taint { .. } => "taint",
        Action::Cordon => "cordon",
        Action::Annotate { .. } => "annotate",
        Action::Event { .. } => "event",
        Action::Evict => "evict",
        Action::Webhook { .. } => "webhook",
    }
}

/// Runs the controller with `client` until `shutdown`.
pub async fn run(
    client: kube::Client,
    config: ControllerConfig,
    actions: Family<ActionLabels, Counter>,
    shutdown: impl Future<Output = ()>,
) {
    let (store, writer) = reflector::store::<CSINode>();
    let stream = watcher(
        Api::<CSINode>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff();
    let mut stream = Box::pin(reflector::reflector(writer, stream));
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                tracing::warn!(resource = "csinodes", error = %e, "watch failed; retrying with backoff");
            }
        }
    });
    let sink = KubeEventSink::new(
        client.clone(),
        "volhealth-remediate",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "volhealth-remediate".into()),
        None,
    );
    let nodes: Api<Node> = Api::all(client);
    let mut planner = Planner::default();
    tokio::pin!(shutdown);
    if store.wait_until_ready().await.is_err() {
        tracing::error!("the CSINode cache never became ready");
        return;
    }
    loop {
        tick(&store, &nodes, &sink, &config, &actions, &mut planner).await;
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(config.tick) => {}
        }
    }
}

async fn tick(
    store: &Store<CSINode>,
    nodes: &Api<Node>,
    sink: &KubeEventSink,
    config: &ControllerConfig,
    actions: &Family<ActionLabels, Counter>,
    planner: &mut Planner,
) {
    let findings: Vec<_> = store.state().iter().flat_map(|n| of_csinode(n)).collect();
    let now = jiff::Timestamp::now();
    let count = |action: &str, result: &str| {
        actions
            .get_or_create(&ActionLabels {
                action: action.into(),
                result: result.into(),
            })
            .inc();
    };
    for planned in planner.plan(&config.policy, &findings, now) {
        let name = action_name(&planned.action);
        let what = planned.describe();
        if config.dry_run {
            tracing::info!(rule = %planned.rule, "dry run: would {what}");
            event(sink, &planned, format!("dry run: would {what}")).await;
            count(name, "dry_run");
            continue;
        }
        let result = match &planned.action {
            Action::Taint { .. } | Action::Cordon => node_action(nodes, &planned).await,
            Action::Event { .. } => {
                event(sink, &planned, what.clone()).await;
                Ok(())
            }
            _ => {
                tracing::warn!(rule = %planned.rule, "not carried out yet: {what}");
                count(name, "unsupported");
                continue;
            }
        };
        match result {
            Ok(()) => {
                tracing::info!(rule = %planned.rule, "{what}");
                count(name, "success");
            }
            Err(e) => {
                tracing::warn!(rule = %planned.rule, error = %e, "could not {what}");
                count(name, "error");
            }
        }
    }
    for u in planner.cleared(&config.policy, &findings) {
        if config.dry_run {
            tracing::info!(rule = %u.rule, "dry run: would remove taint {} from node {}", u.key, u.node);
            count("untaint", "dry_run");
            continue;
        }
        match untaint(nodes, &u).await {
            Ok(()) => {
                tracing::info!(rule = %u.rule, "removed taint {} from node {}", u.key, u.node);
                count("untaint", "success");
            }
            Err(e) => {
                tracing::warn!(rule = %u.rule, error = %e, "could not remove taint {} from node {}", u.key, u.node);
                count("untaint", "error");
            }
        }
    }
}

async fn event(sink: &KubeEventSink, planned: &Planned, message: String) {
    let f = &planned.finding;
    let (api_version, kind) = match f.kind {
        crate::ObjectKind::CSINode => ("storage.k8s.io/v1", "CSINode"),
        crate::ObjectKind::Pod => ("v1", "Pod"),
        crate::ObjectKind::PersistentVolumeClaim => ("v1", "PersistentVolumeClaim"),
    };
    let e = HealthEvent {
        object: ObjectRef {
            api_version,
            kind,
            namespace: f.namespace.clone(),
            name: f.name.clone(),
            uid: None,
        },
        event_type: EventType::Normal,
        reason: "Remediation",
        message,
    };
    if let Err(err) = sink.create(&e, 1).await {
        tracing::warn!(object = %f.name, error = %err, "could not record the remediation Event");
    }
}

async fn node_action(nodes: &Api<Node>, planned: &Planned) -> Result<(), kube::Error> {
    let Some(node) = planned.finding.node.as_deref() else {
        return Ok(());
    };
    let patch = match &planned.action {
        Action::Cordon => serde_json::json!({"spec": {"unschedulable": true}}),
        Action::Taint { key, value, effect } => {
            let current = nodes.get(node).await?;
            let mut taints = current.spec.and_then(|s| s.taints).unwrap_or_default();
            if taints.iter().any(|t| &t.key == key && &t.effect == effect) {
                return Ok(());
            }
            taints.push(k8s_openapi::api::core::v1::Taint {
                key: key.clone(),
                value: value.clone(),
                effect: effect.clone(),
                time_added: None,
            });
            serde_json::json!({"spec": {"taints": taints}})
        }
        _ => return Ok(()),
    };
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn untaint(nodes: &Api<Node>, u: &Untaint) -> Result<(), kube::Error> {
    let current = nodes.get(&u.node).await?;
    let taints = current.spec.and_then(|s| s.taints).unwrap_or_default();
    let kept: Vec<_> = taints
        .into_iter()
        .filter(|t| !(t.key == u.key && t.effect == u.effect))
        .collect();
    let patch = serde_json::json!({"spec": {"taints": kept}});
    nodes
        .patch(&u.node, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Why [`serve`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes client could not be built.
    #[error("loading the Kubernetes client: {0}")]
    Client(#[from] volhealth_writer::Error),
    /// The metrics endpoint could not be bound.
    #[error("binding the metrics endpoint: {0}")]
    Metrics(#[from] volhealth_daemon::Error),
}

/// Loads the client from `kubeconfig`, serves `/metrics` on `http_endpoint` (if any), and runs
/// the controller until `shutdown`.
pub async fn serve(
    kubeconfig: Option<&std::path::Path>,
    config: ControllerConfig,
    http_endpoint: Option<std::net::SocketAddr>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let client = volhealth_writer::kube_client::load(kubeconfig)
        .await?
        .client;
    let mut registry = Registry::default();
    let actions = actions_family(&mut registry);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if let Some(addr) = http_endpoint {
        let endpoints = volhealth_daemon::Endpoints::from_registry(std::sync::Arc::new(registry));
        let bound = volhealth_daemon::BoundEndpoint::bind(addr, endpoints).await?;
        let mut rx = stop_rx.clone();
        tokio::spawn(bound.serve(async move {
            let _ = rx.wait_for(|s| *s).await;
        }));
    }
    tracing::info!(
        rules = config.policy.rules.len(),
        dry_run = config.dry_run,
        "remediation controller started"
    );
    run(client, config, actions, shutdown).await;
    let _ = stop_tx.send(true);
    drop(stop_rx);
    Ok(())
}
