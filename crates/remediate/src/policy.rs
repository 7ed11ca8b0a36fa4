//! The remediation policy file: rules that match a health condition on a PVC, a pod or a CSINode,
//! how long it must hold, and what to do. Validated at start; every error names its line.

use serde::Deserialize;
use std::time::Duration;
pub use volhealth_model::pattern::glob;

/// The whole policy file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Policy {
    /// The rules, each evaluated on its own.
    pub rules: Vec<Rule>,
    /// Never evict more than this share of a namespace's pods per window.
    #[serde(default)]
    pub eviction_budget: Option<EvictionBudget>,
    /// Most actions of one kind per window, by action name (`taint`, `evict`, ...).
    #[serde(default)]
    pub rate_limits: std::collections::BTreeMap<String, RateLimit>,
}

/// A rate limit: at most `max` actions of one kind per `per`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RateLimit {
    /// Largest number of actions per window.
    pub max: u32,
    /// The window (Go duration, e.g. `1m`).
    pub per: String,
}

/// The action names, as `rateLimits` keys and in metrics.
pub const ACTION_NAMES: [&str; 7] = [
    "taint", "untaint", "cordon", "annotate", "event", "evict", "webhook",
];

/// The eviction budget.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EvictionBudget {
    /// Largest share of a namespace's pods evicted per window, in percent (0 < p ≤ 100).
    pub max_percent: f64,
    /// The window (Go duration, e.g. `1h`).
    pub window: String,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A unique name, used in logs, Events and metrics.
    pub name: String,
    /// What the rule matches.
    #[serde(rename = "match")]
    pub matcher: Match,
    /// How long the condition must have held (from its lastTransitionTime), e.g. `5m`.
    #[serde(default, rename = "for")]
    pub hold: Option<String>,
    /// What to do once it has (each a one-key map, `{taint: {...}}`, or a bare name, `evict`).
    pub actions: Vec<Action>,
}

/// The object kinds a rule can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ObjectKind {
    /// `pvc.status.healthStatus` (controller side).
    PersistentVolumeClaim,
    /// `pod.status.volumeHealth` (node side).
    Pod,
    /// `csinode.status.storageHealth` (the node's storage backend).
    CSINode,
}

impl ObjectKind {
    /// The statuses this kind's conditions can have.
    pub fn statuses(self) -> &'static [&'static str] {
        match self {
            ObjectKind::PersistentVolumeClaim | ObjectKind::Pod => {
                &["Inaccessible", "DataLoss", "Degraded"]
            }
            ObjectKind::CSINode => &["StorageUnreachable", "StorageDegraded"],
        }
    }
}

/// What a rule matches: a condition of `object` with `status`, a `reason` and a `driver` (both
/// exact or a glob of `*` and `?`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// The object kind.
    pub object: ObjectKind,
    /// The condition's status.
    pub status: String,
    /// The condition's reason, or a glob (default `*`).
    #[serde(default = "any")]
    pub reason: String,
    /// The CSI driver's name, or a glob (default `*`).
    #[serde(default = "any")]
    pub driver: String,
}

fn any() -> String {
    "*".into()
}

/// One action.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum Action {
    /// Taint the node (removed when the condition clears).
    Taint {
        /// Taint key.
        key: String,
        /// Taint value.
        #[serde(default)]
        value: Option<String>,
        /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
        effect: String,
    },
    /// Mark the node unschedulable.
    Cordon,
    /// Annotate the matched object (for a pod's volume: also its claim).
    Annotate {
        /// Annotation key.
        key: String,
        /// Annotation value.
        value: String,
    },
    /// Emit an Event on the matched object.
    Event {
        /// Event reason (default `Remediation`).
        #[serde(default)]
        reason: Option<String>,
    },
    /// Evict the pod(s) through the Eviction API (PodDisruptionBudgets apply).
    Evict,
    /// POST a JSON description of the match.
    Webhook {
        /// `http://` URL.
        url: String,
    },
}

/// A refused policy file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.join("\n"))]
pub struct PolicyError {
    /// One line per problem, each starting `line N:` where the line is known.
    pub problems: Vec<String>,
}

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

impl Policy {
    /// Parses and validates a policy file's text.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let policy: Policy = serde_saphyr::from_str(text).map_err(|e| {
            let at = e
                .location()
                .map(|l| format!("line {}: ", l.line()))
                .unwrap_or_default();
            PolicyError {
                problems: vec![format!("{at}{}", e.without_snippet())],
            }
        })?;
        let lines = rule_lines(text);
        let mut problems = Vec::new();
        let mut names = std::collections::HashSet::new();
        for (i, rule) in policy.rules.iter().enumerate() {
            let at = match lines.get(i) {
                Some(n) => format!("line {n}: rules[{i}] ({:?})", rule.name),
                None => format!("rules[{i}] ({:?})", rule.name),
            };
            let mut bad = |what: String| problems.push(format!("{at}: {what}"));
            if rule.name.trim().is_empty() {
                bad("name is empty".into());
            } else if !annotation_name(&rule.name) {
                bad("name must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (it names an annotation)".into());
            } else if !names.insert(rule.name.as_str()) {
                bad("name is used by an earlier rule".into());
            }
            let statuses = rule.matcher.object.statuses();
            if !statuses.contains(&rule.matcher.status.as_str()) {
                bad(format!(
                    "match.status {:?} is not one of {} for {:?}",
                    rule.matcher.status,
                    statuses.join(", "),
                    rule.matcher.object
                ));
            }
            if let Some(hold) = &rule.hold
                && let Err(e) = volhealth_daemon::duration::parse(hold)
            {
                bad(format!("for {hold:?}: {e}"));
            }
            if rule.actions.is_empty() {
                bad("actions is empty".into());
            }
            for action in &rule.actions {
                match action {
                    Action::Taint { key, effect, .. } => {
                        if key.is_empty() {
                            bad("taint.key is empty".into());
                        }
                        if rule.matcher.object == ObjectKind::PersistentVolumeClaim {
                            bad("taint needs a node: match a Pod or a CSINode".into());
                        }
                        if !EFFECTS.contains(&effect.as_str()) {
                            bad(format!(
                                "taint.effect {effect:?} is not one of {}",
                                EFFECTS.join(", ")
                            ));
                        }
                    }
                    Action::Cordon if rule.matcher.object == ObjectKind::PersistentVolumeClaim => {
                        bad("cordon needs a node: match a Pod or a CSINode".into());
                    }
                    Action::Evict if rule.matcher.object == ObjectKind::CSINode => {
                        bad("evict needs a pod: match a Pod or a PersistentVolumeClaim".into());
                    }
                    Action::Annotate { key, .. } if key.is_empty() => {
                        bad("annotate.key is empty".into())
                    }
                    Action::Webhook { url } if url.starts_with("https://") => bad(format!(
                        "webhook.url {url:?}: https is not supported yet; use http:// (e.g. to a local relay)"
                    )),
                    Action::Webhook { url } if !url.starts_with("http://") => {
                        bad(format!("webhook.url {url:?} is not an http URL"))
                    }
                    _ => {}
                }
            }
        }
        if let Some(b) = &policy.eviction_budget {
            if !(b.max_percent > 0.0 && b.max_percent <= 100.0) {
                problems.push(format!(
                    "evictionBudget.maxPercent {} is not in (0, 100]",
                    b.max_percent
                ));
            }
            if let Err(e) = volhealth_daemon::duration::parse(&b.window) {
                problems.push(format!("evictionBudget.window {:?}: {e}", b.window));
            }
        }
        for (action, limit) in &policy.rate_limits {
            if !ACTION_NAMES.contains(&action.as_str()) {
                problems.push(format!(
                    "rateLimits.{action}: not an action (one of {})",
                    ACTION_NAMES.join(", ")
                ));
            }
            if limit.max == 0 {
                problems.push(format!("rateLimits.{action}.max must be at least 1"));
            }
            match volhealth_daemon::duration::parse(&limit.per) {
                Ok(d) if d.is_zero() => {
                    problems.push(format!("rateLimits.{action}.per must be longer than 0"))
                }
                Ok(_) => {}
                Err(e) => problems.push(format!("rateLimits.{action}.per {:?}: {e}", limit.per)),
            }
        }
        if problems.is_empty() {
            Ok(policy)
        } else {
            Err(PolicyError { problems })
        }
    }
}

impl Rule {
    /// The hold time (zero when `for` is not set).
    pub fn hold(&self) -> Duration {
        self.hold
            .as_deref()
            .and_then(|h| volhealth_daemon::duration::parse(h).ok())
            .unwrap_or_default()
    }
}

/// Whether `name` is valid as the name part of an annotation key.
fn annotation_name(name: &str) -> bool {
    let ok_end = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    name.len() <= 63
        && ok_end(name.chars().next())
        && ok_end(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Policy {
    /// The eviction budget: the policy's, else at most 10% of a namespace's pods per hour.
    pub fn budget(&self) -> (f64, Duration) {
        match &self.eviction_budget {
            Some(b) => (
                b.max_percent,
                volhealth_daemon::duration::parse(&b.window).unwrap_or(DEFAULT_BUDGET_WINDOW),
            ),
            None => (DEFAULT_BUDGET_PERCENT, DEFAULT_BUDGET_WINDOW),
        }
    }

    /// The rate limit of `action` as (max, window), if the policy sets one.
    pub fn rate_limit(&self, action: &str) -> Option<(u32, Duration)> {
        let l = self.rate_limits.get(action)?;
        Some((l.max, volhealth_daemon::duration::parse(&l.per).ok()?))
    }
}

/// The eviction budget's share when the policy sets none, in percent.
pub const DEFAULT_BUDGET_PERCENT: f64 = 10.0;
/// The eviction budget's window when the policy sets none.
pub const DEFAULT_BUDGET_WINDOW: Duration = Duration::from_secs(3600);

/// The 1-based line of each item of the top-level `rules:` list, in order.
fn rule_lines(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_rules = false;
    let mut indent: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let depth = line.len() - trimmed.len();
        if depth == 0 && !trimmed.starts_with('-') {
            in_rules = trimmed.starts_with("rules:");
            indent = None;
            continue;
        }
        if in_rules && trimmed.starts_with("- ") {
            let want = *indent.get_or_insert(depth);
            if depth == want {
                out.push(n + 1);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
