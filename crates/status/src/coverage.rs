//! Which source watches each volume, from what the writers publish (the monitor on the driver's
//! CSIDriver, each agent on its node's CSINode; see `volhealth_writer::coverage`), so that "no
//! condition" on a volume nothing watches is never shown as healthy.

use crate::findings::{Finding, Snapshot, Source, pv_drivers};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use volhealth_writer::coverage::{self, NodeSources};

/// The word for a side no writer said anything about.
pub const UNKNOWN: &str = "unknown";
/// The word for the node side of a volume no pod on a node uses (nothing there to watch).
pub const NOT_MOUNTED: &str = "-";

/// What a volume's conditions mean, given what watches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// It has conditions.
    Unhealthy,
    /// No condition, and a source watches it on at least one side.
    Healthy,
    /// No condition, and nothing watches it on either side: its health is not known.
    NotWatched,
    /// No condition, and no writer said what watches it (writers of an older version, no
    /// CSIDriver object, or no right to read what they published).
    Unknown,
}

impl Verdict {
    /// The word in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Unhealthy => "unhealthy",
            Verdict::Healthy => "healthy",
            Verdict::NotWatched => "not watched",
            Verdict::Unknown => UNKNOWN,
        }
    }
}

/// One volume (a claim bound to a PersistentVolume) and what watches it. Field names are the
/// documented `-o json` schema (`volumes[]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeCoverage {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub claim: String,
    /// The bound PersistentVolume.
    pub persistent_volume: String,
    /// Its CSI driver, when known.
    pub driver: Option<String>,
    /// What watches it on the controller side: `rpc`, `legacy`, `annotation`, `none` or `unknown`.
    pub controller: String,
    /// What watches it on the nodes its pods run on: `rpc`, `legacy`, `node-faults`,
    /// `rpc+node-faults`, `legacy+node-faults`, `none` or `unknown` (several, comma-separated,
    /// when its nodes differ); `-` when no pod on a node uses it.
    pub node: String,
    /// Whether it is healthy, unhealthy, not watched, or unknown.
    pub health: Verdict,
    /// The statuses of its conditions (PVC and pod volume), when unhealthy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<String>,
}

impl VolumeCoverage {
    /// The HEALTH cell: the statuses when unhealthy, else the word.
    pub fn health_cell(&self) -> String {
        if self.statuses.is_empty() {
            self.health.as_str().to_string()
        } else {
            self.statuses.join(",")
        }
    }
}

fn controller_word(annotations: Option<&BTreeMap<String, String>>) -> String {
    match annotations
        .and_then(|a| a.get(coverage::CONTROLLER_SOURCE))
        .map(|v| coverage::parse_controller(v))
    {
        Some(Ok(Some(s))) => s.short().to_string(),
        Some(Ok(None)) => coverage::NONE.to_string(),
        Some(Err(_)) | None => UNKNOWN.to_string(),
    }
}

/// Every bound claim in `snap` and what watches it, in namespace and name order; `findings`
/// are the conditions already collected from the same snapshot.
pub fn collect(snap: &Snapshot, findings: &[Finding]) -> Vec<VolumeCoverage> {
    let pv_driver = pv_drivers(snap);
    let controller: BTreeMap<&str, String> = snap
        .csidrivers
        .iter()
        .filter_map(|d| {
            let name = d.metadata.name.as_deref()?;
            Some((name, controller_word(d.metadata.annotations.as_ref())))
        })
        .collect();
    // Node → driver → sources, for every CSINode whose annotation can be read.
    let node_sources: BTreeMap<&str, BTreeMap<String, NodeSources>> = snap
        .csinodes
        .iter()
        .filter_map(|c| {
            let name = c.metadata.name.as_deref()?;
            let value = c
                .metadata
                .annotations
                .as_ref()?
                .get(coverage::NODE_SOURCES)?;
            Some((name, coverage::parse_node(value).ok()?))
        })
        .collect();
    // (namespace, claim) → the nodes its pods run on.
    let mut claim_nodes: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for pod in &snap.pods {
        let (Some(ns), Some(spec)) = (pod.metadata.namespace.as_deref(), pod.spec.as_ref()) else {
            continue;
        };
        let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) else {
            continue;
        };
        for v in spec.volumes.iter().flatten() {
            if let Some(c) = &v.persistent_volume_claim {
                claim_nodes
                    .entry((ns, c.claim_name.as_str()))
                    .or_default()
                    .insert(node);
            }
        }
    }
    // (namespace, claim) → statuses of its conditions.
    let mut statuses: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for f in findings {
        let (Some(ns), Some(claim)) = (f.namespace.as_deref(), f.claim.as_deref()) else {
            continue;
        };
        if matches!(f.source, Source::Controller | Source::Node) {
            statuses
                .entry((ns, claim))
                .or_default()
                .insert(f.status.as_str());
        }
    }

    let mut out = Vec::new();
    for pvc in &snap.pvcs {
        let (Some(ns), Some(name)) = (
            pvc.metadata.namespace.as_deref(),
            pvc.metadata.name.as_deref(),
        ) else {
            continue;
        };
        let Some(pv) = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty())
        else {
            continue;
        };
        let driver = pv_driver.get(pv).copied();
        let controller = driver
            .and_then(|d| controller.get(d).cloned())
            .unwrap_or_else(|| UNKNOWN.to_string());
        let node = match claim_nodes.get(&(ns, name)) {
            None => NOT_MOUNTED.to_string(),
            Some(nodes) => {
                let words: BTreeSet<String> = nodes
                    .iter()
                    .map(|n| {
                        driver
                            .and_then(|d| node_sources.get(n)?.get(d))
                            .map_or_else(|| UNKNOWN.to_string(), |s| s.short())
                    })
                    .collect();
                words.into_iter().collect::<Vec<_>>().join(",")
            }
        };
        let found: Vec<String> = statuses
            .get(&(ns, name))
            .map(|s| s.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        let watching = |w: &str| w != UNKNOWN && w != coverage::NONE && w != NOT_MOUNTED;
        let health = if !found.is_empty() {
            Verdict::Unhealthy
        } else if watching(&controller) || node.split(',').any(watching) {
            Verdict::Healthy
        } else if controller == UNKNOWN || node.split(',').any(|w| w == UNKNOWN) {
            Verdict::Unknown
        } else {
            Verdict::NotWatched
        };
        out.push(VolumeCoverage {
            namespace: ns.to_string(),
            claim: name.to_string(),
            persistent_volume: pv.to_string(),
            driver: driver.map(str::to_string),
            controller,
            node,
            health,
            statuses: found,
        });
    }
    out.sort_by(|a, b| (&a.namespace, &a.claim).cmp(&(&b.namespace, &b.claim)));
    out
}

/// The volumes nothing watches, as `namespace/claim`.
pub fn not_watched(volumes: &[VolumeCoverage]) -> Vec<String> {
    volumes
        .iter()
        .filter(|v| v.health == Verdict::NotWatched)
        .map(|v| format!("{}/{}", v.namespace, v.claim))
        .collect()
}

/// The warning of the JSON/YAML document when some volumes are not watched (they make the
/// document's `healthy` false).
pub fn warning(volumes: &[VolumeCoverage]) -> Option<String> {
    let names = not_watched(volumes);
    let n = names.len();
    (n > 0).then(|| {
        format!(
            "{n} volume{} not watched by any health source on either side, so no condition says nothing about {}: {}",
            if n == 1 { " is" } else { "s are" },
            if n == 1 { "it" } else { "them" },
            names.join(", ")
        )
    })
}

/// One line counting the volumes by what watches them on each side.
pub fn summary(volumes: &[VolumeCoverage]) -> String {
    fn counts<'a>(words: impl Iterator<Item = &'a str>) -> String {
        let mut by: BTreeMap<&str, usize> = BTreeMap::new();
        for w in words {
            *by.entry(w).or_default() += 1;
        }
        by.iter()
            .map(|(w, n)| {
                let w = if *w == NOT_MOUNTED { "not mounted" } else { w };
                format!("{n} {w}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
    let n = volumes.len();
    let mut line = format!(
        "{n} volume{}; controller side: {}; node side: {}",
        if n == 1 { "" } else { "s" },
        counts(volumes.iter().map(|v| v.controller.as_str())),
        counts(volumes.iter().map(|v| v.node.as_str())),
    );
    let missing = not_watched(volumes).len();
    if missing > 0 {
        line.push_str(&format!("; {missing} not watched"));
    }
    let unknown = volumes
        .iter()
        .filter(|v| v.health == Verdict::Unknown)
        .count();
    if unknown > 0 {
        line.push_str(&format!("; {unknown} unknown"));
    }
    line.push('.');
    line
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::findings;
    use serde_json::json;

    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    /// Four claims: `rpc` (health RPCs on both sides, a condition on its pod), `legacy` (the
    /// bridge on both sides, healthy), `bare` (a driver with nothing, node faults off) and
    /// `old` (a driver whose writers published nothing).
    pub(crate) fn snapshot() -> Snapshot {
        let pvc = |name: &str| {
            from(json!({"metadata": {"name": name, "namespace": "default"},
                "spec": {"volumeName": format!("pv-{name}")}}))
        };
        let pv = |name: &str, driver: &str| {
            from(json!({"metadata": {"name": format!("pv-{name}")},
                "spec": {"csi": {"driver": driver, "volumeHandle": name}}}))
        };
        let pod = |name: &str, claim: &str, node: &str, health: serde_json::Value| {
            from(json!({"metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": node, "containers": [],
                         "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
                "status": {"volumeHealth": health}}))
        };
        let csidriver = |name: &str, source: &str| {
            from(json!({"metadata": {"name": name, "annotations": {
                    coverage::CONTROLLER_SOURCE: source, coverage::CONTROLLER_MODE: "get"}},
                "spec": {}}))
        };
        Snapshot {
            pvcs: vec![pvc("rpc"), pvc("legacy"), pvc("bare"), pvc("old")],
            pods: vec![
                pod(
                    "web-rpc",
                    "rpc",
                    "node-1",
                    json!([{"name": "data", "healthConditions": [{"status": "Degraded", "reason": "SlowIo"}]}]),
                ),
                pod("web-legacy", "legacy", "node-1", json!(null)),
                pod("web-bare", "bare", "node-1", json!(null)),
                pod("web-old", "old", "node-1", json!(null)),
            ],
            csinodes: vec![from(json!({
                "metadata": {"name": "node-1", "annotations": {coverage::NODE_SOURCES:
                    r#"{"legacy.example":"legacy-volume-condition","bare.example":"none","rpc.example":"health-rpcs"}"#}},
                "spec": {"drivers": []}}))],
            pvs: vec![
                pv("rpc", "rpc.example"),
                pv("legacy", "legacy.example"),
                pv("bare", "bare.example"),
                pv("old", "old.example"),
            ],
            csidrivers: vec![
                csidriver("rpc.example", "health-rpcs"),
                csidriver("legacy.example", "legacy-volume-condition"),
                csidriver("bare.example", "none"),
                from(json!({"metadata": {"name": "old.example"}, "spec": {}})),
            ],
        }
    }

    #[test]
    fn each_volume_says_what_watches_it_and_no_condition_without_a_watcher_is_not_healthy() {
        let snap = snapshot();
        let v = collect(&snap, &findings::collect(&snap));
        let rows: Vec<(&str, &str, &str, String)> = v
            .iter()
            .map(|v| {
                (
                    v.claim.as_str(),
                    v.controller.as_str(),
                    v.node.as_str(),
                    v.health_cell(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("bare", "none", "none", "not watched".to_string()),
                ("legacy", "legacy", "legacy", "healthy".to_string()),
                ("old", "unknown", "unknown", "unknown".to_string()),
                ("rpc", "rpc", "rpc", "Degraded".to_string()),
            ]
        );
        assert_eq!(not_watched(&v), ["default/bare"]);
        assert!(warning(&v).unwrap().contains("default/bare"));
    }

    #[test]
    fn a_volume_no_pod_mounts_has_no_node_side() {
        let mut snap = snapshot();
        snap.pods.clear();
        let v = collect(&snap, &[]);
        assert!(v.iter().all(|v| v.node == NOT_MOUNTED), "{v:#?}");
        let bare = v.iter().find(|v| v.claim == "bare").unwrap();
        assert_eq!(bare.health, Verdict::NotWatched);
        let rpc = v.iter().find(|v| v.claim == "rpc").unwrap();
        assert_eq!(rpc.health, Verdict::Healthy);
    }

    #[test]
    fn the_summary_counts_each_side() {
        let snap = snapshot();
        let v = collect(&snap, &findings::collect(&snap));
        assert_eq!(
            summary(&v),
            "4 volumes; controller side: 1 legacy, 1 none, 1 rpc, 1 unknown; \
             node side: 1 legacy, 1 none, 1 rpc, 1 unknown; 1 not watched; 1 unknown."
        );
    }
}
