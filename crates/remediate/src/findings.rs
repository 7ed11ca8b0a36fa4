//! The health conditions of each watched object as [`Finding`]s, and whether a rule is due for
//! one: its status, reason and driver match and it has held for the rule's `for`, counted from
//! the condition's `lastTransitionTime` (so a restart of the controller does not reset it).

use crate::policy::{ObjectKind, Rule, glob};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use volhealth_kube_access::objects::storage_health;

/// One condition on one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The object's kind.
    pub kind: ObjectKind,
    /// Its namespace (None for a CSINode).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// For a pod, the volume; for a CSINode, None; for a PVC, None.
    pub volume: Option<String>,
    /// The node concerned (a CSINode's name, a pod's node), if known.
    pub node: Option<String>,
    /// The CSI driver, if known.
    pub driver: Option<String>,
    /// The condition's status.
    pub status: String,
    /// The condition's reason.
    pub reason: String,
    /// When the condition began (None: unknown, never due for a rule with `for`).
    pub since: Option<Timestamp>,
}

impl Finding {
    /// Identifies this transition: one rule acts at most once per key.
    pub fn transition_key(&self, rule: &Rule) -> String {
        format!(
            "{}|{:?}|{}|{}|{}|{}|{}|{}",
            rule.name,
            self.kind,
            self.namespace.as_deref().unwrap_or_default(),
            self.name,
            self.volume.as_deref().unwrap_or_default(),
            self.status,
            self.reason,
            self.since.map(|t| t.to_string()).unwrap_or_default()
        )
    }
}

/// Whether `rule` matches `finding` at all (ignoring time).
pub fn matches(rule: &Rule, finding: &Finding) -> bool {
    let m = &rule.matcher;
    m.object == finding.kind
        && m.status == finding.status
        && glob(&m.reason, &finding.reason)
        && (m.driver == "*"
            || finding
                .driver
                .as_deref()
                .is_some_and(|d| glob(&m.driver, d)))
}

/// Whether `rule` matches `finding` and it has held for the rule's `for` at `now`.
pub fn due(rule: &Rule, finding: &Finding, now: Timestamp) -> bool {
    if !matches(rule, finding) {
        return false;
    }
    let hold = rule.hold();
    if hold.is_zero() {
        return true;
    }
    let Some(since) = finding.since else {
        return false;
    };
    let Ok(held) = now.duration_since(since).try_into() else {
        return false;
    };
    let held: std::time::Duration = held;
    held >= hold
}

/// The storage conditions of a CSINode, one per driver entry condition.
pub fn of_csinode(node: &CSINode) -> Vec<Finding> {
    let name = node.metadata.name.clone().unwrap_or_default();
    storage_health(node)
        .iter()
        .flat_map(|e| {
            let name = name.clone();
            e.health_conditions.iter().flatten().map(move |c| Finding {
                kind: ObjectKind::CSINode,
                namespace: None,
                name: name.clone(),
                volume: None,
                node: Some(name.clone()),
                driver: Some(e.name.clone()),
                status: c.status.clone(),
                reason: c.reason.clone(),
                since: c.last_transition_time.as_ref().map(|t| t.0),
            })
        })
        .collect()
}

/// The controller-side conditions of a PVC whose PV is of `driver`.
pub fn of_pvc(pvc: &PersistentVolumeClaim, driver: Option<&str>) -> Vec<Finding> {
    let Some(hs) = pvc.status.as_ref().and_then(|s| s.health_status.as_ref()) else {
        return Vec::new();
    };
    let since = hs.last_transition_time.as_ref().map(|t| t.0);
    hs.health_conditions
        .iter()
        .flatten()
        .map(|c| Finding {
            kind: ObjectKind::PersistentVolumeClaim,
            namespace: pvc.metadata.namespace.clone(),
            name: pvc.metadata.name.clone().unwrap_or_default(),
            volume: None,
            node: None,
            driver: driver.map(str::to_string),
            status: c.status.clone(),
            reason: c.reason.clone(),
            since,
        })
        .collect()
}

/// The node-side conditions of a pod's volumes; `driver_of` names the driver of a volume.
pub fn of_pod(pod: &Pod, driver_of: impl Fn(&str) -> Option<String>) -> Vec<Finding> {
    let entries = pod
        .status
        .as_ref()
        .and_then(|s| s.volume_health.as_deref())
        .unwrap_or_default();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let mut out = Vec::new();
    for e in entries {
        let since = e.last_transition_time.as_ref().map(|t| t.0);
        let driver = driver_of(&e.name);
        for c in e.health_conditions.iter().flatten() {
            out.push(Finding {
                kind: ObjectKind::Pod,
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                volume: Some(e.name.clone()),
                node: node.clone(),
                driver: driver.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                since,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;

    fn csinode(since: &str) -> CSINode {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "node-2"},
            "status": {"storageHealth": [{"name": "hostpath.volhealth.io", "healthConditions": [
                {"status": "StorageUnreachable", "reason": "NetworkPartition", "lastTransitionTime": since}]}]}
        }))
        .unwrap()
    }

    fn rule(text: &str) -> Rule {
        Policy::parse(text).unwrap().rules.remove(0)
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_csinode_condition_is_due_once_held_for_the_rules_time() {
        let r = rule(
            "rules:\n- name: r\n  match: {object: CSINode, status: StorageUnreachable, reason: \"Network*\", driver: \"*.volhealth.io\"}\n  for: 1m\n  actions: [cordon]\n",
        );
        let f = of_csinode(&csinode("2026-01-01T00:00:00Z"));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].node.as_deref(), Some("node-2"));
        assert!(!due(&r, &f[0], t("2026-01-01T00:00:59Z")));
        // Measured from lastTransitionTime, not from when the controller first saw it.
        assert!(due(&r, &f[0], t("2026-01-01T00:01:00Z")));
    }

    #[test]
    fn status_reason_driver_and_kind_must_all_match() {
        let f = of_csinode(&csinode("2026-01-01T00:00:00Z")).remove(0);
        let now = t("2026-01-02T00:00:00Z");
        for (text, want) in [
            ("{object: CSINode, status: StorageUnreachable}", true),
            ("{object: CSINode, status: StorageDegraded}", false),
            (
                "{object: CSINode, status: StorageUnreachable, reason: DiskFailure}",
                false,
            ),
            (
                "{object: CSINode, status: StorageUnreachable, driver: other.io}",
                false,
            ),
            ("{object: Pod, status: Inaccessible}", false),
        ] {
            let r = rule(&format!(
                "rules:\n- name: r\n  match: {text}\n  actions: [event: {{}}]\n"
            ));
            assert_eq!(due(&r, &f, now), want, "{text}");
        }
    }

    #[test]
    fn story_5_a_pvc_inaccessible_for_five_minutes() {
        let pvc: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db-data", "namespace": "db"},
            "status": {"healthStatus": {"lastTransitionTime": "2026-01-01T00:00:00Z",
                "healthConditions": [{"status": "Inaccessible", "reason": "DiskFailure"}]}}
        }))
        .unwrap();
        let r = rule(
            "rules:\n- name: r\n  match: {object: PersistentVolumeClaim, status: Inaccessible, reason: DiskFailure, driver: local.csi.example.com}\n  for: 5m\n  actions: [evict]\n",
        );
        let f = of_pvc(&pvc, Some("local.csi.example.com")).remove(0);
        assert!(!due(&r, &f, t("2026-01-01T00:04:59Z")));
        assert!(due(&r, &f, t("2026-01-01T00:05:00Z")));
        let other = of_pvc(&pvc, Some("other.io")).remove(0);
        assert!(!due(&r, &other, t("2026-01-01T01:00:00Z")));
        // A new transition (a later lastTransitionTime) is a new key: the rule may act again.
        let mut later = f.clone();
        later.since = Some(t("2026-01-01T02:00:00Z"));
        assert_ne!(f.transition_key(&r), later.transition_key(&r));
    }

    #[test]
    fn pod_volume_conditions_carry_node_volume_and_driver() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"nodeName": "node-1", "containers": []},
            "status": {"volumeHealth": [{"name": "data", "lastTransitionTime": "2026-01-01T00:00:00Z",
                "healthConditions": [{"status": "Degraded", "reason": "SlowIo"}]}]}
        }))
        .unwrap();
        let f = of_pod(&pod, |v| {
            (v == "data").then(|| "hostpath.volhealth.io".to_string())
        });
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].volume.as_deref(), Some("data"));
        assert_eq!(f[0].node.as_deref(), Some("node-1"));
        assert_eq!(f[0].driver.as_deref(), Some("hostpath.volhealth.io"));
    }
}
