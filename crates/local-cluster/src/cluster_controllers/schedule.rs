//! kube-scheduler's role, for pods with claims: a pod with no node whose claims are all bound
//! goes to a node that has the driver's node plugin (and matches the pod's `nodeSelector`),
//! the one running the fewest pods; it is bound there with the `pods/binding` subresource.

use super::{Config, Snapshot};
use crate::failure::Context as _;
use crate::failure::{Result, chain};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::collections::BTreeMap;
use volhealth_kube_access::objects::pod_claim_names;

/// The claim names a pod's volumes use.
pub fn claims_of(pod: &Pod) -> Vec<String> {
    pod_claim_names(pod).map(str::to_string).collect()
}

/// Why a pod cannot be placed: no node with the driver's node plugin matches its selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "0/{nodes} nodes are available: none with the driver's node plugin matches nodeSelector {selector:?}"
)]
pub struct NoNode {
    /// How many nodes the cluster has.
    pub nodes: usize,
    /// The pod's `nodeSelector`.
    pub selector: BTreeMap<String, String>,
}

/// Why a pod cannot be placed yet, or the node it goes to. `nodes` are the cluster's Node
/// objects, `plugins` the nodes with the driver's node plugin, `load` the pods per node.
pub fn pick_node(
    pod: &Pod,
    nodes: &[Node],
    plugins: &[&str],
    load: &BTreeMap<String, usize>,
) -> Result<String, NoNode> {
    let selector = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.clone())
        .unwrap_or_default();
    let fits = |node: &Node| {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    };
    let mut candidates: Vec<&str> = nodes
        .iter()
        .filter(|n| fits(n))
        .filter_map(|n| n.metadata.name.as_deref())
        .filter(|n| plugins.contains(n))
        .collect();
    candidates.sort_by_key(|n| (load.get(*n).copied().unwrap_or(0), n.to_string()));
    candidates
        .first()
        .map(|n| n.to_string())
        .ok_or_else(|| NoNode {
            nodes: nodes.len(),
            selector: selector.clone(),
        })
}

/// Whether every claim of `pod` exists and is Bound.
fn claims_bound(pod: &Pod, snap: &Snapshot) -> bool {
    let ns = pod.metadata.namespace.as_deref();
    claims_of(pod).iter().all(|name| {
        snap.claims.iter().any(|c| {
            c.metadata.namespace.as_deref() == ns
                && c.metadata.name.as_deref() == Some(name.as_str())
                && c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
        })
    })
}

async fn bind_pod(client: &kube::Client, pod: &Pod, node: &str) -> Result<()> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": ns, "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    match pods
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &name,
            &PostParams::default(),
            &binding,
        )
        .await
    {
        Ok(_) => Ok(()),
        // A server without pods/binding: set the node directly, as a binding would.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 405 => pods
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"nodeName": node}})),
            )
            .await
            .map(|_| ())
            .with_context(|| format!("setting the node of pod {ns}/{name}")),
        Err(e) => Err(e).with_context(|| format!("binding pod {ns}/{name} to {node}")),
    }
}

/// Places every unscheduled pod with claims whose claims are bound.
pub async fn schedule(client: &kube::Client, cfg: &Config, snap: &Snapshot) {
    let plugins: Vec<&str> = cfg.nodes.keys().map(String::as_str).collect();
    let mut load: BTreeMap<String, usize> = BTreeMap::new();
    for p in &snap.pods {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            *load.entry(n).or_default() += 1;
        }
    }
    for pod in &snap.pods {
        let unscheduled = pod
            .spec
            .as_ref()
            .is_some_and(|s| s.node_name.as_deref().is_none_or(str::is_empty));
        if !unscheduled
            || pod.metadata.deletion_timestamp.is_some()
            || claims_of(pod).is_empty()
            || !claims_bound(pod, snap)
        {
            continue;
        }
        let what = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        match pick_node(pod, &snap.nodes, &plugins, &load) {
            Ok(node) => match bind_pod(client, pod, &node).await {
                Ok(()) => {
                    tracing::info!("scheduled pod {what} to {node}");
                    *load.entry(node).or_default() += 1;
                }
                Err(e) => tracing::warn!("{}", chain(&e)),
            },
            Err(why) => tracing::debug!("pod {what} not scheduled: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, zone: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"zone": zone}}}))
            .unwrap()
    }

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
            .unwrap()
    }

    #[test]
    fn the_least_loaded_node_with_a_plugin_that_matches_the_selector() {
        let nodes = [node("a", "x"), node("b", "x"), node("c", "y")];
        let spec = json!({"containers": [], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c1"}}]});
        let p = pod(spec.clone());
        assert_eq!(claims_of(&p), vec!["c1".to_string()]);
        let load = BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 1)]);
        assert_eq!(
            pick_node(&p, &nodes, &["a", "b", "c"], &load),
            Ok("c".into())
        );
        assert_eq!(pick_node(&p, &nodes, &["a", "b"], &load), Ok("b".into()));
        // Ties go to the first name.
        assert_eq!(
            pick_node(&p, &nodes, &["a", "b"], &BTreeMap::new()),
            Ok("a".into())
        );

        let mut with_selector = spec.clone();
        with_selector["nodeSelector"] = json!({"zone": "y"});
        let p = pod(with_selector);
        assert_eq!(
            pick_node(&p, &nodes, &["a", "b", "c"], &load),
            Ok("c".into())
        );
        let err = pick_node(&p, &nodes, &["a", "b"], &load).unwrap_err();
        assert!(err.to_string().contains("0/3 nodes"), "{err}");
    }

    #[test]
    fn a_node_without_a_node_object_is_not_picked() {
        let p = pod(json!({"containers": []}));
        assert!(pick_node(&p, &[node("a", "x")], &["b"], &BTreeMap::new()).is_err());
    }
}
