//! The controller loop: watch-fed caches of CSINodes, claims, volumes, pods and nodes; every tick
//! the rules are planned with [`Planner`] and carried out (taint, untaint, cordon, annotate,
//! Event, evict, webhook) within the rate limits and the eviction budget, while this replica
//! leads: its [`Leadership`] is asked before every action (every pod evicted), so a replica
//! whose Lease is not fresh stops at once, mid-tick. Dry-run, the default, only says what it
//! would do (log and Event).

use crate::act::{self, Eviction};
use crate::cache::Caches;
use crate::findings::due;
use crate::limits::RateLimits;
use crate::plan::{EvictionBudget, Planned, Planner};
use crate::policy::{Action, Policy};
use crate::webhook;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::time::Duration;
use volhealth_kube_access::events::KubeEventSink;
use volhealth_kube_access::objects::node_taints;

pub use crate::leader::{LeaderElection, Leadership};

/// Labels of `volhealth_remediation_actions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// `taint`, `untaint`, `cordon`, `annotate`, `event`, `evict` or `webhook`.
    pub action: String,
    /// `success`, `error`, `dry_run`, `blocked` (a PodDisruptionBudget), `over_budget`,
    /// `rate_limited`, `retry` (a webhook attempt failed) or `gave_up`.
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

fn count(actions: &Family<ActionLabels, Counter>, action: &str, result: &str) {
    actions
        .get_or_create(&ActionLabels {
            action: action.into(),
            result: result.into(),
        })
        .inc();
}

/// Whether an action is finished for its transition or to be tried again on a later tick.
enum Outcome {
    Done,
    Retry,
}

struct Controller {
    client: kube::Client,
    evictions: kube::Client,
    caches: Caches,
    sink: KubeEventSink,
    nodes: Api<Node>,
    config: ControllerConfig,
    actions: Family<ActionLabels, Counter>,
    planner: Planner,
    budget: EvictionBudget,
    limits: RateLimits,
    webhooks: Option<webhook::Sender>,
    /// Event reasons of the policy's `event` actions, kept for the process's life.
    reasons: HashMap<String, &'static str>,
    adopted: bool,
    leadership: Leadership,
}

/// Runs the controller with `client` until `shutdown`, acting on every tick.
pub async fn run(
    client: kube::Client,
    config: ControllerConfig,
    actions: Family<ActionLabels, Counter>,
    shutdown: impl Future<Output = ()>,
) {
    let evictions = client.clone();
    run_while_leader(
        client,
        evictions,
        config,
        actions,
        Leadership::unelected(),
        shutdown,
    )
    .await
}

/// Runs the controller with `client` until `shutdown`, acting while `leadership` is fresh (asked
/// before every action); evictions go through `evictions`, a client that does not retry a 429
/// itself.
pub async fn run_while_leader(
    client: kube::Client,
    evictions: kube::Client,
    config: ControllerConfig,
    actions: Family<ActionLabels, Counter>,
    leadership: Leadership,
    shutdown: impl Future<Output = ()>,
) {
    let caches = Caches::start(&client);
    let sink = KubeEventSink::new(
        client.clone(),
        "volhealth-remediate",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "volhealth-remediate".into()),
        None,
    );
    let (percent, window) = config.policy.budget();
    let webhooks = match webhook::Sender::new() {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::error!(error = %e, "cannot build the webhook client; webhooks fail");
            None
        }
    };
    // Startup: each distinct reason is leaked once, so Events can carry it as `&'static str`.
    let reasons = config
        .policy
        .rules
        .iter()
        .flat_map(|r| r.actions.iter())
        .filter_map(|a| match a {
            Action::Event { reason: Some(r) } => Some(r.clone()),
            _ => None,
        })
        .map(|r| {
            let leaked: &'static str = Box::leak(r.clone().into_boxed_str());
            (r, leaked)
        })
        .collect();
    let mut c = Controller {
        nodes: Api::all(client.clone()),
        client,
        evictions,
        caches,
        sink,
        budget: EvictionBudget::new(percent, window),
        limits: RateLimits::new(&config.policy),
        config,
        actions,
        planner: Planner::default(),
        webhooks,
        reasons,
        adopted: false,
        leadership,
    };
    tokio::pin!(shutdown);
    tokio::select! {
        _ = &mut shutdown => return,
        ready = c.caches.ready() => if !ready {
            tracing::error!("the caches never became ready");
            return;
        }
    }
    loop {
        if c.leadership.is_fresh() {
            c.tick(Timestamp::now()).await;
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(c.config.tick) => {}
        }
    }
}

impl Controller {
    async fn tick(&mut self, now: Timestamp) {
        let findings = self.caches.findings();
        let policy = self.config.policy.clone();
        if !self.adopted && !self.config.dry_run {
            self.adopt_taints();
        }
        self.adopted = true;
        // Transitions acted on before a restart, as the objects' annotations record.
        for rule in &policy.rules {
            for f in findings.iter().filter(|f| due(rule, f, now)) {
                if act::recorded(self.caches.annotations_of(f).as_ref(), &rule.name, f) {
                    self.planner.already_acted(rule, f);
                }
            }
        }
        let planned = self.planner.plan(&policy, &findings, now);
        let mut touched: Vec<(String, crate::findings::Finding)> = Vec::new();
        let mut planned = planned.into_iter();
        while let Some(p) = planned.next() {
            // The Lease may have gone stale while earlier actions ran: nothing more this tick;
            // what is left is put back, to be offered again once this replica leads again.
            if !self.still_leading() {
                for p in std::iter::once(p).chain(planned) {
                    self.planner.retry(&policy, &p);
                }
                return;
            }
            match self.carry_out(&p, now).await {
                Outcome::Done => self.planner.done(&policy, &p),
                Outcome::Retry => self.planner.retry(&policy, &p),
            }
            if !touched.iter().any(|(r, f)| *r == p.rule && *f == p.finding) {
                touched.push((p.rule.clone(), p.finding.clone()));
            }
        }
        if !self.config.dry_run {
            for (rule_name, f) in &touched {
                let Some(rule) = policy.rules.iter().find(|r| &r.name == rule_name) else {
                    continue;
                };
                if !self.planner.complete(rule, f) {
                    continue;
                }
                if !self.still_leading() {
                    return;
                }
                let live = self.live_markers(rule_name, f, &findings);
                if let Err(e) = act::record(&self.client, rule_name, f, &live).await {
                    tracing::debug!(rule = %rule_name, error = %e, "could not record the transition on {}", f.name);
                }
            }
        }
        for u in self.planner.cleared(&policy, &findings) {
            if !self.still_leading() {
                return;
            }
            if self.config.dry_run {
                tracing::info!(rule = %u.rule, "dry run: would remove taint {} from node {}", u.key, u.node);
                count(&self.actions, "untaint", "dry_run");
                continue;
            }
            match act::untaint(&self.nodes, &u).await {
                Ok(()) => {
                    tracing::info!(rule = %u.rule, "removed taint {} from node {}", u.key, u.node);
                    count(&self.actions, "untaint", "success");
                }
                Err(e) => {
                    tracing::warn!(rule = %u.rule, error = %e, "could not remove taint {} from node {}", u.key, u.node);
                    count(&self.actions, "untaint", "error");
                }
            }
        }
    }

    /// Taints of the policy's taint actions already on nodes (set before a restart) come off
    /// when their condition has cleared, as if this process had set them.
    fn adopt_taints(&mut self) {
        for node in self.caches.nodes.state() {
            let name = node.metadata.name.clone().unwrap_or_default();
            let taints = node_taints(&node);
            for rule in &self.config.policy.rules {
                for a in &rule.actions {
                    if let Action::Taint { key, effect, .. } = a
                        && taints.iter().any(|t| &t.key == key && &t.effect == effect)
                    {
                        self.planner.adopt_taint(&rule.name, &name, key, effect);
                    }
                }
            }
        }
    }

    /// The markers of `f`'s object for `rule` that are still live (other volumes of a pod).
    fn live_markers(
        &self,
        rule: &str,
        f: &crate::findings::Finding,
        findings: &[crate::findings::Finding],
    ) -> Vec<String> {
        let current = self.caches.annotations_of(f).unwrap_or_default();
        let key = format!("{}{rule}", act::RECORD_PREFIX);
        let live: Vec<String> = findings
            .iter()
            .filter(|o| o.kind == f.kind && o.namespace == f.namespace && o.name == f.name)
            .map(act::marker)
            .collect();
        current
            .get(&key)
            .map(|v| {
                v.split(',')
                    .filter(|m| live.iter().any(|l| l == m))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn carry_out(&mut self, p: &Planned, now: Timestamp) -> Outcome {
        let name = action_name(&p.action);
        let what = p.describe();
        if self.config.dry_run {
            let what = match &p.action {
                Action::Evict => format!("{what}: {}", self.eviction_targets(p).join(", ")),
                _ => what,
            };
            tracing::info!(rule = %p.rule, "dry run: would {what}");
            act::event(
                &self.sink,
                p,
                "Remediation",
                format!("dry run: would {what}"),
            )
            .await;
            count(&self.actions, name, "dry_run");
            return Outcome::Done;
        }
        if !self.limits.take(name, now) {
            tracing::info!(rule = %p.rule, "rate limited, later: {what}");
            count(&self.actions, name, "rate_limited");
            return Outcome::Retry;
        }
        let result = match &p.action {
            Action::Taint { .. } | Action::Cordon => act::node_action(&self.nodes, p).await,
            Action::Event { reason } => {
                let reason = reason
                    .as_ref()
                    .and_then(|r| self.reasons.get(r).copied())
                    .unwrap_or("Remediation");
                act::event(&self.sink, p, reason, what.clone()).await;
                Ok(())
            }
            Action::Annotate { key, value } => {
                act::annotate(&self.client, &p.finding, serde_json::json!({ key: value })).await
            }
            Action::Webhook { url } => {
                self.webhook(p, url, now);
                return Outcome::Done;
            }
            Action::Evict => return self.evict(p, now).await,
        };
        match result {
            Ok(()) => {
                tracing::info!(rule = %p.rule, "{what}");
                count(&self.actions, name, "success");
                Outcome::Done
            }
            Err(e) => {
                tracing::warn!(rule = %p.rule, error = %e, "could not {what}; retrying");
                count(&self.actions, name, "error");
                Outcome::Retry
            }
        }
    }

    fn webhook(&self, p: &Planned, url: &str, now: Timestamp) {
        let Some(sender) = &self.webhooks else {
            count(&self.actions, "webhook", "error");
            return;
        };
        let actions = self.actions.clone();
        sender.send(
            url.to_string(),
            webhook::document(p, now),
            move |o| match o {
                webhook::Outcome::Delivered => count(&actions, "webhook", "success"),
                webhook::Outcome::Failed => count(&actions, "webhook", "retry"),
                webhook::Outcome::GaveUp => count(&actions, "webhook", "gave_up"),
            },
        );
    }

    /// The pods an `evict` of `p` is about: the matched pod, or a claim's pods.
    fn eviction_targets(&self, p: &Planned) -> Vec<String> {
        let f = &p.finding;
        let ns = f.namespace.as_deref().unwrap_or_default();
        match f.kind {
            crate::ObjectKind::Pod => vec![format!("pod {ns}/{}", f.name)],
            crate::ObjectKind::PersistentVolumeClaim => self
                .caches
                .pods_of_claim(ns, &f.name)
                .into_iter()
                .map(|pod| format!("pod {ns}/{pod}"))
                .collect(),
            crate::ObjectKind::CSINode => Vec::new(),
        }
    }

    /// Whether this replica may still act; logs when it may not.
    fn still_leading(&self) -> bool {
        let fresh = self.leadership.is_fresh();
        if !fresh {
            tracing::warn!("the leader Lease is not fresh; not acting until it is confirmed again");
        }
        fresh
    }

    async fn evict(&mut self, p: &Planned, now: Timestamp) -> Outcome {
        let f = &p.finding;
        let ns = f.namespace.clone().unwrap_or_default();
        let pods = match f.kind {
            crate::ObjectKind::Pod => vec![f.name.clone()],
            crate::ObjectKind::PersistentVolumeClaim => self.caches.pods_of_claim(&ns, &f.name),
            crate::ObjectKind::CSINode => Vec::new(),
        };
        let mut outcome = Outcome::Done;
        for pod in pods {
            if !self.still_leading() {
                return Outcome::Retry;
            }
            let total = self.caches.pods_in(&ns);
            if !self.budget.take(&ns, total, now) {
                tracing::warn!(rule = %p.rule, "not evicting pod {ns}/{pod}: the eviction budget of namespace {ns} is spent");
                count(&self.actions, "evict", "over_budget");
                outcome = Outcome::Retry;
                continue;
            }
            match act::evict(&self.evictions, &ns, &pod).await {
                Ok(Eviction::Evicted) => {
                    // Counted as soon as the pod is evicted: the Event after it is an API call
                    // of its own, and the count must not wait for it (nor miss the eviction if
                    // it is slow or fails).
                    count(&self.actions, "evict", "success");
                    let what = format!(
                        "evicted pod {ns}/{pod} (rule {}: {:?} {} is {} ({}))",
                        p.rule, f.kind, f.name, f.status, f.reason
                    );
                    tracing::info!(rule = %p.rule, "{what}");
                    act::event(&self.sink, p, "Remediation", what).await;
                }
                Ok(Eviction::Gone) => self.budget.refund(&ns),
                Ok(Eviction::Blocked(why)) => {
                    self.budget.refund(&ns);
                    tracing::info!(rule = %p.rule, "eviction of pod {ns}/{pod} blocked by a PodDisruptionBudget ({why}); retrying later");
                    count(&self.actions, "evict", "blocked");
                    outcome = Outcome::Retry;
                }
                Err(e) => {
                    self.budget.refund(&ns);
                    tracing::warn!(rule = %p.rule, error = %e, "could not evict pod {ns}/{pod}; retrying");
                    count(&self.actions, "evict", "error");
                    outcome = Outcome::Retry;
                }
            }
        }
        outcome
    }
}

/// Why [`serve`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes client could not be built.
    #[error("loading the Kubernetes client: {0}")]
    Client(#[from] volhealth_kube_access::Error),
    /// The metrics endpoint could not be bound.
    #[error("binding the metrics endpoint: {0}")]
    Metrics(#[from] volhealth_daemon::Error),
    /// Leader election could not start.
    #[error("starting leader election: {0}")]
    Leader(#[from] crate::leader::StartError),
}

/// Loads the client from `kubeconfig`, serves `/metrics` on `http_endpoint` (if any), elects a
/// leader (if `leader_election`), and runs the controller until `shutdown`.
pub async fn serve(
    kubeconfig: Option<&std::path::Path>,
    config: ControllerConfig,
    http_endpoint: Option<std::net::SocketAddr>,
    leader_election: Option<LeaderElection>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let client = volhealth_kube_access::client::load(kubeconfig)
        .await?
        .client;
    let evictions = volhealth_kube_access::client::load_with_retry(kubeconfig, false)
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
    let election = match &leader_election {
        Some(le) => Some(crate::leader::start(client.clone(), le).await?),
        None => None,
    };
    let leadership = election
        .as_ref()
        .map_or_else(Leadership::unelected, |e| e.leadership.clone());
    run_while_leader(client, evictions, config, actions, leadership, shutdown).await;
    if let Some(e) = election {
        e.release().await;
    }
    let _ = stop_tx.send(true);
    drop(stop_rx);
    Ok(())
}
