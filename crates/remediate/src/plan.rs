//! What the controller would do now: the actions of every due rule, once per transition, the
//! taints to remove once their condition has cleared, and the eviction budget.

use crate::findings::{Finding, due, matches};
use crate::limits::forget_before;
use crate::policy::{Action, Policy};
use jiff::Timestamp;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::Duration;

/// One action to take for one finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The rule's name.
    pub rule: String,
    /// The action.
    pub action: Action,
    /// The finding that made the rule due.
    pub finding: Finding,
    /// The action's place in the rule's `actions`.
    pub index: usize,
}

/// A taint to remove: its condition is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untaint {
    /// The rule that set it.
    pub rule: String,
    /// The node.
    pub node: String,
    /// The taint's key.
    pub key: String,
    /// The taint's effect.
    pub effect: String,
}

impl Planned {
    /// What the action does, in words (the dry-run log line and Event message).
    pub fn describe(&self) -> String {
        let f = &self.finding;
        let object = match &f.namespace {
            Some(ns) => format!("{:?} {ns}/{}", f.kind, f.name),
            None => format!("{:?} {}", f.kind, f.name),
        };
        let node = f.node.as_deref().unwrap_or("?");
        let what = match &self.action {
            Action::Taint { key, value, effect } => match value {
                Some(v) => format!("taint node {node} with {key}={v}:{effect}"),
                None => format!("taint node {node} with {key}:{effect}"),
            },
            Action::Cordon => format!("cordon node {node}"),
            Action::Annotate { key, value } => format!("annotate {object} with {key}={value}"),
            Action::Event { .. } => format!("record an Event on {object}"),
            Action::Evict => format!("evict the pod(s) of {object}"),
            Action::Webhook { url } => format!("POST the match to {url}"),
        };
        format!(
            "{what} (rule {}: {object} is {} ({}))",
            self.rule, f.status, f.reason
        )
    }
}

/// Remembers what was done, so a transition is acted on once and taints come off when it ends.
#[derive(Debug, Default)]
pub struct Planner {
    acted: HashSet<String>,
    /// (rule, node) → (key, effect) of taints this controller set.
    taints: BTreeMap<(String, String), (String, String)>,
    /// (transition, action index) planned and not yet done.
    pending: HashSet<(String, usize)>,
    /// (transition, action index) to offer again.
    retry: HashSet<(String, usize)>,
}

impl Planner {
    /// The actions due at `now` for `findings` that were not planned before for the same
    /// transition, and those put back with [`Planner::retry`].
    pub fn plan(&mut self, policy: &Policy, findings: &[Finding], now: Timestamp) -> Vec<Planned> {
        let mut out = Vec::new();
        for rule in &policy.rules {
            for f in findings.iter().filter(|f| due(rule, f, now)) {
                let key = f.transition_key(rule);
                let first = self.acted.insert(key.clone());
                for (index, action) in rule.actions.iter().enumerate() {
                    let slot = (key.clone(), index);
                    if first {
                        self.pending.insert(slot);
                    } else if !self.retry.remove(&slot) {
                        continue;
                    }
                    if let (Action::Taint { key, effect, .. }, Some(node)) = (action, &f.node) {
                        self.taints.insert(
                            (rule.name.clone(), node.clone()),
                            (key.clone(), effect.clone()),
                        );
                    }
                    out.push(Planned {
                        rule: rule.name.clone(),
                        action: action.clone(),
                        finding: f.clone(),
                        index,
                    });
                }
            }
        }
        out
    }

    /// Marks `p` as done: it is not planned again for its transition.
    pub fn done(&mut self, policy: &Policy, p: &Planned) {
        if let Some(rule) = policy.rules.iter().find(|r| r.name == p.rule) {
            self.pending
                .remove(&(p.finding.transition_key(rule), p.index));
        }
    }

    /// Puts `p` back: the next [`Planner::plan`] offers it again (blocked, rate limited, failed).
    pub fn retry(&mut self, policy: &Policy, p: &Planned) {
        if let Some(rule) = policy.rules.iter().find(|r| r.name == p.rule) {
            self.retry.insert((p.finding.transition_key(rule), p.index));
        }
    }

    /// Whether every action of `rule` for `finding` is done.
    pub fn complete(&self, rule: &crate::Rule, finding: &Finding) -> bool {
        let key = finding.transition_key(rule);
        self.acted.contains(&key)
            && (0..rule.actions.len()).all(|i| !self.pending.contains(&(key.clone(), i)))
    }

    /// Records that `rule` already acted on `finding`'s transition (before a restart, as an
    /// annotation on the object says): nothing is planned for it.
    pub fn already_acted(&mut self, rule: &crate::Rule, finding: &Finding) {
        self.acted.insert(finding.transition_key(rule));
    }

    /// Takes over a taint found on a node (set before a restart): it comes off once its
    /// condition clears.
    pub fn adopt_taint(&mut self, rule: &str, node: &str, key: &str, effect: &str) {
        self.taints
            .entry((rule.to_string(), node.to_string()))
            .or_insert_with(|| (key.to_string(), effect.to_string()));
    }

    /// The taints whose rule no longer matches any finding on their node.
    pub fn cleared(&mut self, policy: &Policy, findings: &[Finding]) -> Vec<Untaint> {
        let mut out = Vec::new();
        self.taints.retain(|(rule_name, node), (key, effect)| {
            let still = policy
                .rules
                .iter()
                .filter(|r| &r.name == rule_name)
                .any(|r| {
                    findings
                        .iter()
                        .any(|f| f.node.as_deref() == Some(node.as_str()) && matches(r, f))
                });
            if !still {
                out.push(Untaint {
                    rule: rule_name.clone(),
                    node: node.clone(),
                    key: key.clone(),
                    effect: effect.clone(),
                });
            }
            still
        });
        // Findings that cleared may come back as a new transition: forget the old keys.
        let live: HashSet<String> = policy
            .rules
            .iter()
            .flat_map(|r| findings.iter().map(move |f| f.transition_key(r)))
            .collect();
        self.acted.retain(|k| live.contains(k));
        self.pending.retain(|(k, _)| live.contains(k));
        self.retry.retain(|(k, _)| live.contains(k));
        out
    }
}

/// Never more than `max_percent` of a namespace's pods evicted per `window`.
#[derive(Debug)]
pub struct EvictionBudget {
    max_percent: f64,
    window: Duration,
    evicted: HashMap<String, VecDeque<Timestamp>>,
}

impl EvictionBudget {
    /// A budget of `max_percent` per `window`.
    pub fn new(max_percent: f64, window: Duration) -> EvictionBudget {
        EvictionBudget {
            max_percent,
            window,
            evicted: HashMap::new(),
        }
    }

    /// Whether one more eviction in `namespace` (which has `pods` pods) fits at `now`; if it
    /// does, it is counted.
    pub fn take(&mut self, namespace: &str, pods: usize, now: Timestamp) -> bool {
        let window = self.window;
        let recent = self.evicted.entry(namespace.to_string()).or_default();
        forget_before(recent, now, window);
        let allowed = (pods as f64 * self.max_percent / 100.0).floor() as usize;
        if recent.len() < allowed {
            recent.push_back(now);
            true
        } else {
            false
        }
    }

    /// Gives back the last eviction taken in `namespace` (it did not happen).
    pub fn refund(&mut self, namespace: &str) {
        if let Some(recent) = self.evicted.get_mut(namespace) {
            recent.pop_back();
        }
    }
}

#[cfg(test)]
mod tests;
