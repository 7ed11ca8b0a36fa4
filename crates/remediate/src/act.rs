//! Carrying out actions against the API server: node taints and cordon, annotations, evictions
//! through the Eviction API, Events, and the annotation that records a transition as acted on.

use crate::ObjectKind;
use crate::findings::Finding;
use crate::plan::{Planned, Untaint};
use crate::policy::Action;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, EvictParams, Patch, PatchParams};
use volhealth_kube_access::events::{EventSink, EventType, HealthEvent, KubeEventSink, ObjectRef};

/// The prefix of the annotation, on the matched object, that records which transition a rule
/// has acted on: `remediation.volhealth.io/<rule>`.
pub const RECORD_PREFIX: &str = "remediation.volhealth.io/";

/// How an eviction went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    /// The pod was evicted.
    Evicted,
    /// A PodDisruptionBudget refused it (HTTP 429); try again later.
    Blocked(String),
    /// The pod no longer exists.
    Gone,
}

/// Taints or cordons the finding's node (a no-op when the taint is already there).
pub async fn node_action(nodes: &Api<Node>, planned: &Planned) -> Result<(), kube::Error> {
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

/// Removes a taint this controller set.
pub async fn untaint(nodes: &Api<Node>, u: &Untaint) -> Result<(), kube::Error> {
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

/// Merges `annotations` into the metadata of the finding's object.
pub async fn annotate(
    client: &kube::Client,
    f: &Finding,
    annotations: serde_json::Value,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    let patch = Patch::Merge(&patch);
    let params = PatchParams::default();
    let ns = f.namespace.as_deref().unwrap_or_default();
    match f.kind {
        ObjectKind::PersistentVolumeClaim => {
            Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
                .patch(&f.name, &params, &patch)
                .await?;
        }
        ObjectKind::Pod => {
            Api::<Pod>::namespaced(client.clone(), ns)
                .patch(&f.name, &params, &patch)
                .await?;
        }
        ObjectKind::CSINode => {
            Api::<CSINode>::all(client.clone())
                .patch(&f.name, &params, &patch)
                .await?;
        }
    }
    Ok(())
}

/// Evicts pod `namespace/name` through the Eviction API (PodDisruptionBudgets apply).
pub async fn evict(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Eviction, kube::Error> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    match pods.evict(name, &EvictParams::default()).await {
        Ok(_) => Ok(Eviction::Evicted),
        Err(kube::Error::Api(s)) if s.code == 429 => Ok(Eviction::Blocked(s.message.clone())),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Eviction::Gone),
        Err(e) => Err(e),
    }
}

/// The record of one finding's transition, as kept in the [`RECORD_PREFIX`] annotation.
pub fn marker(f: &Finding) -> String {
    format!(
        "{}{}/{}@{}",
        f.volume
            .as_deref()
            .map(|v| format!("{v}:"))
            .unwrap_or_default(),
        f.status,
        f.reason,
        f.since.map(|t| t.to_string()).unwrap_or_default()
    )
}

/// Whether `annotations` record that `rule` acted on `f`'s transition.
pub fn recorded(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    rule: &str,
    f: &Finding,
) -> bool {
    let want = marker(f);
    annotations
        .and_then(|a| a.get(&format!("{RECORD_PREFIX}{rule}")))
        .is_some_and(|v| v.split(',').any(|m| m == want))
}

/// Records on the object that `rule` acted on `f`'s transition (kept with the other live
/// transitions already recorded there, `live`).
pub async fn record(
    client: &kube::Client,
    rule: &str,
    f: &Finding,
    live: &[String],
) -> Result<(), kube::Error> {
    let mut all: Vec<String> = live.to_vec();
    let m = marker(f);
    if !all.contains(&m) {
        all.push(m);
    }
    let annotations = serde_json::json!({ format!("{RECORD_PREFIX}{rule}"): all.join(",") });
    annotate(client, f, annotations).await
}

/// Records an Event on the finding's object.
pub async fn event(sink: &KubeEventSink, planned: &Planned, reason: &'static str, message: String) {
    let f = &planned.finding;
    let (api_version, kind) = match f.kind {
        ObjectKind::CSINode => ("storage.k8s.io/v1", "CSINode"),
        ObjectKind::Pod => ("v1", "Pod"),
        ObjectKind::PersistentVolumeClaim => ("v1", "PersistentVolumeClaim"),
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
        reason,
        message,
    };
    if let Err(err) = sink.create(&e, 1).await {
        tracing::warn!(object = %f.name, error = %err, "could not record the remediation Event");
    }
}
