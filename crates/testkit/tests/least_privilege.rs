//! The RBAC shipped in `deploy/kubernetes` is enough for the writers and has nothing spare.
//!
//! The embedded API server runs with `--authorization-mode=Node,RBAC`; the shipped service
//! accounts, roles and bindings are applied with `kubectl apply`; the monitor (with leader
//! election) and the agent run in this process as those service accounts and nothing else.
//! With every grant they do all their work — status, Events, the Lease, the CSINode, what
//! watches the volumes on the CSIDriver and the CSINode — and the
//! server refuses them nothing. Then, one (resource, verb) pair of one rule at a time, the
//! grant is taken away and a writer started afresh must be refused something (a 403 from the
//! server), or the pair was spare and the test fails naming it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use volhealth_agent::KubeletRoot;
use volhealth_driver::condition::{storage_status, volume_status};
use volhealth_driver::injection::Side;
use volhealth_monitor::{LeaderElection, MonitorConfig};
use volhealth_testkit::kubectl::{self, Kubectl};
use volhealth_testkit::{
    NodeWorld, Service, ServiceError, create, run_agent, run_monitor, storage_conditions, wait_for,
};
use volhealth_writer::coverage;

const DRIVER: &str = "hostpath.volhealth.io";
const NODE: &str = "node-a";
const MONITOR_SA: &str = "system:serviceaccount:kube-system:csi-external-health-monitor";
const AGENT_SA: &str = "system:serviceaccount:kube-system:volhealth-agent";
/// A trial that is refused nothing must have done all its work by then.
const WORK: Duration = Duration::from_secs(30);
/// How long a writer without one permission gets to ask for it.
const ASK: Duration = Duration::from_secs(20);

fn tokens() -> String {
    format!(
        "admintok,admin,1,\"system:masters\"\n\
         monitortok,{MONITOR_SA},2,\"system:serviceaccounts,system:serviceaccounts:kube-system\"\n\
         agenttok,{AGENT_SA},3,\"system:serviceaccounts,system:serviceaccounts:kube-system\"\n"
    )
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One role the shipped files grant.
#[derive(Clone)]
struct Grant {
    kind: String,
    namespace: Option<String>,
    name: String,
    rules: Vec<Value>,
}

/// The roles in the shipped RBAC files, with the rules as written.
fn shipped_grants() -> Vec<Grant> {
    let mut out = Vec::new();
    for file in [
        "deploy/kubernetes/monitor/rbac.yaml",
        "deploy/kubernetes/agent/rbac.yaml",
    ] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        for v in serde_saphyr::from_multiple::<Value>(&text).unwrap() {
            let kind = v["kind"].as_str().unwrap_or_default().to_string();
            if kind != "ClusterRole" && kind != "Role" {
                continue;
            }
            out.push(Grant {
                kind,
                namespace: v["metadata"]["namespace"].as_str().map(str::to_string),
                name: v["metadata"]["name"].as_str().unwrap().to_string(),
                rules: v["rules"].as_array().cloned().unwrap_or_default(),
            });
        }
    }
    assert!(out.len() >= 3, "the monitor's two roles and the agent's");
    out
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Every (rule, resource, verb) a grant holds.
fn pairs(g: &Grant) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for (i, rule) in g.rules.iter().enumerate() {
        for r in strings(&rule["resources"]) {
            for v in strings(&rule["verbs"]) {
                out.push((i, r.clone(), v));
            }
        }
    }
    out
}

/// The strings of the list `values`, but `one`.
fn all_but(values: &Value, one: &str) -> Vec<String> {
    strings(values).into_iter().filter(|v| v != one).collect()
}

/// The rules of `g` without `verb` on `resource` in rule `index` (the rule is split so that
/// everything else it granted stays).
fn without(g: &Grant, index: usize, resource: &str, verb: &str) -> Vec<Value> {
    let mut rules = Vec::new();
    for (i, rule) in g.rules.iter().enumerate() {
        if i != index {
            rules.push(rule.clone());
            continue;
        }
        let others = all_but(&rule["resources"], resource);
        if !others.is_empty() {
            let mut r = rule.clone();
            r["resources"] = json!(others);
            rules.push(r);
        }
        let verbs = all_but(&rule["verbs"], verb);
        if !verbs.is_empty() {
            let mut r = rule.clone();
            r["resources"] = json!([resource]);
            r["verbs"] = json!(verbs);
            rules.push(r);
        }
    }
    rules
}

async fn set_rules(admin: &kube::Client, g: &Grant, rules: Vec<Value>) {
    let body = Patch::Merge(json!({"rules": rules}));
    let params = PatchParams::default();
    match g.kind.as_str() {
        "ClusterRole" => {
            Api::<ClusterRole>::all(admin.clone())
                .patch(&g.name, &params, &body)
                .await
                .unwrap();
        }
        _ => {
            let ns = g.namespace.as_deref().unwrap_or("kube-system");
            Api::<Role>::namespaced(admin.clone(), ns)
                .patch(&g.name, &params, &body)
                .await
                .unwrap();
        }
    }
}

/// Responses with code 403 the server has given so far.
async fn refusals(admin: &kube::Client) -> f64 {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = admin.request_text(req).await.unwrap();
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains("code=\"403\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The node world the trials run in.
struct World(NodeWorld);

impl std::ops::Deref for World {
    type Target = NodeWorld;
    fn deref(&self) -> &NodeWorld {
        &self.0
    }
}

#[derive(Debug, PartialEq)]
enum Trial {
    /// Everything the writer does happened, and the server refused it nothing.
    Worked,
    /// The server refused the writer a request.
    Refused,
    /// The writer's `run` returned by itself.
    Ended,
}

async fn event_with(admin: &kube::Client, name: &str, text: &str) -> bool {
    Api::<Event>::all(admin.clone())
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .map(|l| {
            l.items
                .iter()
                .any(|e| e.message.as_deref().is_some_and(|m| m.contains(text)))
        })
        .unwrap_or(false)
}

/// Whether object `name` of `api` carries annotation `key`; None while it cannot be read.
async fn has_annotation<K>(api: &Api<K>, name: &str, key: &str) -> Option<bool>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object = api.get(name).await.ok()?;
    Some(
        object
            .meta()
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(key)),
    )
}

/// The trial's outcome once the writer is stopped: a writer that stopped by itself because the
/// server refused it counts as refused; stopping for any other reason fails the test.
fn settle(stopped: Result<(), ServiceError>, outcome: Trial, who: &str) -> Trial {
    match (outcome, stopped) {
        (Trial::Ended, Err(e)) if e.to_string().to_ascii_lowercase().contains("forbidden") => {
            Trial::Refused
        }
        (Trial::Ended, r) => panic!("the {who} ended by itself: {r:?}"),
        (Trial::Worked, r) => {
            r.unwrap_or_else(|e| panic!("the {who} stops cleanly: {e}"));
            Trial::Worked
        }
        (Trial::Refused, _) => Trial::Refused,
    }
}

impl World {
    /// How a trial ends before its writer worked, if it does: refused (the server counts a
    /// refusal past `base`), or `writer` stopped. A writer refused at start may stop with an
    /// error: the refusal is what counts.
    async fn cut_short(&self, base: f64, writer: &Service) -> Option<Trial> {
        if refusals(&self.admin).await > base {
            return Some(Trial::Refused);
        }
        writer.ended().then_some(Trial::Ended)
    }

    /// Starts a writer (`who`, through `start`) and waits up to `patience` until `worked` (given
    /// when the writer was started) says everything it does has happened, the server refuses it
    /// something, or it ends by itself; then stops it. `worked` answers None while it cannot tell.
    async fn trial<F, Fut>(
        &self,
        who: &str,
        patience: Duration,
        start: impl FnOnce() -> Service,
        worked: F,
    ) -> Trial
    where
        F: Fn(tokio::time::Instant) -> Fut,
        Fut: std::future::Future<Output = Option<bool>>,
    {
        let base = refusals(&self.admin).await;
        let started = tokio::time::Instant::now();
        let writer = start();
        let what = format!("the {who} to work or be refused");
        let outcome = wait_for(patience, &what, || async {
            if let Some(cut_short) = self.cut_short(base, &writer).await {
                return Some(cut_short);
            }
            worked(started).await?.then_some(Trial::Worked)
        })
        .await;
        settle(writer.stop(), outcome, who)
    }

    async fn monitor_trial(&self, n: usize, patience: Duration) -> Trial {
        let reason = format!("Trial{n}");
        self.driver.inject_volume(
            &self.volume,
            Side::Controller,
            volume_status::DEGRADED,
            &reason,
        );
        // The monitor publishes what watches the driver's volumes only when its CSIDriver says
        // something else: take the value away, so that every trial must write it.
        let csidrivers: Api<CSIDriver> = Api::all(self.admin.clone());
        let unset = json!({"metadata": {"annotations": {
            coverage::CONTROLLER_SOURCE: null, coverage::CONTROLLER_MODE: null}}});
        csidrivers
            .patch(DRIVER, &PatchParams::default(), &Patch::Merge(&unset))
            .await
            .unwrap();
        let leases: Api<Lease> = Api::namespaced(self.admin.clone(), "kube-system");
        for l in leases.list(&ListParams::default()).await.unwrap().items {
            let name = l.metadata.name.unwrap_or_default();
            let _ = leases.delete(&name, &DeleteParams::default()).await;
        }
        let config = MonitorConfig {
            leader_election: Some(LeaderElection {
                namespace: Some("kube-system".into()),
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_secs(1),
                identity: Some(format!("monitor-{n}")),
                labels: Default::default(),
            }),
            ..self.monitor_config(None)
        };
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(self.admin.clone(), "default");
        let start = || run_monitor("monitor", config);
        let (pvcs, leases, csidrivers, reason) = (&pvcs, &leases, &csidrivers, &reason);
        let worked = |started: tokio::time::Instant| async move {
            let on_status = pvcs
                .get("claim-web")
                .await
                .ok()
                .and_then(|p| p.status?.health_status?.health_conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.reason == *reason);
            let holder = leases
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .iter()
                .filter_map(|l| l.spec.as_ref()?.holder_identity.clone())
                .any(|h| h == format!("monitor-{n}"));
            // Long enough for the Lease to be renewed over the one it created.
            let renewed = started.elapsed() > Duration::from_secs(5);
            let published = has_annotation(csidrivers, DRIVER, coverage::CONTROLLER_SOURCE).await?;
            Some(
                on_status
                    && holder
                    && renewed
                    && published
                    && event_with(&self.admin, "claim-web", reason).await,
            )
        };
        self.trial("monitor", patience, start, worked).await
    }

    /// The agent twice: once finding no CSINode (it creates one), once finding one a kubelet
    /// made without its driver (it adds the driver); refused in either is refused.
    async fn agent_trial(&self, n: usize, patience: Duration) -> Trial {
        for kubelet_made_csinode in [false, true] {
            let outcome = self.agent_run(n, kubelet_made_csinode, patience).await;
            if outcome != Trial::Worked {
                return outcome;
            }
        }
        Trial::Worked
    }

    async fn agent_run(&self, n: usize, kubelet_made_csinode: bool, patience: Duration) -> Trial {
        let reason = format!("Trial{n}{}", if kubelet_made_csinode { "b" } else { "a" });
        self.driver.inject_volume(
            &self.volume,
            Side::Node,
            volume_status::INACCESSIBLE,
            &reason,
        );
        self.driver.clear_storage();
        self.driver
            .inject_storage(NODE, storage_status::STORAGE_DEGRADED, &reason);
        let csinodes: Api<CSINode> = Api::all(self.admin.clone());
        let _ = csinodes.delete(NODE, &DeleteParams::default()).await;
        if kubelet_made_csinode {
            create(
                &csinodes,
                json!({"metadata": {"name": NODE}, "spec": {"drivers": []}}),
            )
            .await;
        }
        let config = self.agent_config("agenttok", None);
        let start = || run_agent("agent", config);
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), "default");
        let csinodes: Api<CSINode> = Api::all(self.admin.clone());
        let worked = |_started| async {
            let on_pod = pods
                .get("web")
                .await
                .ok()?
                .status?
                .volume_health?
                .iter()
                .flat_map(|e| e.health_conditions.iter().flatten())
                .any(|c| c.reason == reason);
            let on_csinode = storage_conditions(&self.admin, NODE, DRIVER)
                .await
                .iter()
                .any(|(_, r)| *r == reason);
            let published = has_annotation(&csinodes, NODE, coverage::NODE_SOURCES).await?;
            Some(
                on_pod
                    && on_csinode
                    && published
                    && event_with(&self.admin, "web", &reason).await
                    && event_with(&self.admin, NODE, &reason).await,
            )
        };
        self.trial("agent", patience, start, worked).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_rbac_is_sufficient_and_has_nothing_spare() {
    if !kubectl::available() {
        return;
    }
    let world = World(
        NodeWorld::start(
            DRIVER,
            NODE,
            &tokens(),
            Some("Node,RBAC"),
            KubeletRoot::volume_dirs,
        )
        .await,
    );
    let admin = world.admin.clone();
    // The driver's CSIDriver, on which the monitor publishes what watches its volumes.
    create(
        &Api::<CSIDriver>::all(admin.clone()),
        json!({"metadata": {"name": DRIVER}, "spec": {}}),
    )
    .await;
    let cache = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::new(&world.api, cache.path());
    kubectl.ok(&[
        "apply",
        "-k",
        repo().join("deploy/kubernetes/monitor").to_str().unwrap(),
    ]);
    kubectl.ok(&[
        "apply",
        "-f",
        repo()
            .join("deploy/kubernetes/agent/rbac.yaml")
            .to_str()
            .unwrap(),
    ]);

    // Sufficient: with every grant, all the work is done and nothing is refused.
    let mut n = 0;
    assert_eq!(
        world.monitor_trial(n, WORK).await,
        Trial::Worked,
        "the monitor"
    );
    n += 1;
    assert_eq!(world.agent_trial(n, WORK).await, Trial::Worked, "the agent");

    // Minimal: without any one (resource, verb) of any rule, the writer is refused something.
    let mut spare = Vec::new();
    for g in shipped_grants() {
        let monitor = g.name.starts_with("volhealth-monitor");
        for (index, resource, verb) in pairs(&g) {
            n += 1;
            set_rules(&admin, &g, without(&g, index, &resource, &verb)).await;
            let outcome = if monitor {
                world.monitor_trial(n, ASK).await
            } else {
                world.agent_trial(n, ASK).await
            };
            set_rules(&admin, &g, g.rules.clone()).await;
            if outcome != Trial::Refused {
                spare.push(format!("{} {}: {verb} {resource}", g.kind, g.name));
            }
        }
    }
    assert!(spare.is_empty(), "grants nothing needs: {spare:#?}");

    world.0.stop([]);
}
