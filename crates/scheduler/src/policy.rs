//! The HealthSchedulingPolicy of a CSI driver: the KEP's `{"rules": [...]}` shape, read from the
//! CSIDriver annotation [`ANNOTATION`] (the v1.37 CSIDriverSpec has no field for it yet), in JSON or
//! YAML, and validated before it can reject a single node.

use serde::Deserialize;

/// The CSIDriver annotation holding the policy.
pub const ANNOTATION: &str = "volhealth.io/health-scheduling-policy";

/// Storage health statuses a rule may name (as `csinode.status.storageHealth` spells them).
pub const STORAGE_STATUSES: [&str; 2] = ["StorageUnreachable", "StorageDegraded"];

/// Persistent volume access modes a rule may name.
pub const ACCESS_MODES: [&str; 4] = [
    "ReadWriteOnce",
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOncePod",
];

/// Persistent volume modes a rule may name.
pub const VOLUME_MODES: [&str; 2] = ["Filesystem", "Block"];

/// A driver's scheduling policy: a node is filtered out when any rule matches.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthSchedulingPolicy {
    /// The rules, any of which filters a node out.
    pub rules: Vec<HealthSchedulingRule>,
}

/// One rule: a storage status, optionally narrowed to access modes and a volume mode.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HealthSchedulingRule {
    /// The StorageHealthCondition status that triggers the rule.
    pub status: String,
    /// When set, the rule applies only to claims with one of these access modes.
    #[serde(default)]
    pub access_modes: Vec<String>,
    /// When set, the rule applies only to claims of this volume mode.
    #[serde(default)]
    pub volume_mode: Option<String>,
}

/// Why a policy was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The text is neither JSON nor YAML of the policy's shape.
    #[error("parsing the {ANNOTATION} annotation: {0}")]
    Syntax(String),
    /// The shape is right but a value is not.
    #[error("validating the {ANNOTATION} annotation: {0}")]
    Invalid(String),
}

impl HealthSchedulingPolicy {
    /// Parses and validates `text` (JSON or YAML).
    pub fn parse(text: &str) -> Result<HealthSchedulingPolicy, PolicyError> {
        // YAML is a superset of JSON, so one parser reads both.
        let policy: HealthSchedulingPolicy = serde_saphyr::from_str(text)
            .map_err(|e| PolicyError::Syntax(e.without_snippet().to_string()))?;
        policy.validate()?;
        Ok(policy)
    }

    /// Checks every rule's values against the ones the API defines.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let mut problems = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if !STORAGE_STATUSES.contains(&rule.status.as_str()) {
                problems.push(format!(
                    "rules[{i}].status {:?} is not one of {}",
                    rule.status,
                    STORAGE_STATUSES.join(", ")
                ));
            }
            for (j, mode) in rule.access_modes.iter().enumerate() {
                if !ACCESS_MODES.contains(&mode.as_str()) {
                    problems.push(format!(
                        "rules[{i}].accessModes[{j}] {mode:?} is not one of {}",
                        ACCESS_MODES.join(", ")
                    ));
                }
            }
            if let Some(mode) = &rule.volume_mode
                && !VOLUME_MODES.contains(&mode.as_str())
            {
                problems.push(format!(
                    "rules[{i}].volumeMode {mode:?} is not one of {}",
                    VOLUME_MODES.join(", ")
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(PolicyError::Invalid(problems.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_kep_example_as_yaml_and_as_json() {
        let yaml = "rules:\n  - status: StorageUnreachable\n";
        let json = r#"{"rules": [{"status": "StorageUnreachable"}]}"#;
        let a = HealthSchedulingPolicy::parse(yaml).unwrap();
        let b = HealthSchedulingPolicy::parse(json).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.rules.len(), 1);
        assert!(a.rules[0].access_modes.is_empty());
        assert_eq!(a.rules[0].volume_mode, None);
    }

    #[test]
    fn the_second_kep_example() {
        let yaml = "rules:\n  - status: StorageUnreachable\n  - status: StorageDegraded\n    accessModes: [ReadWriteOnce]\n";
        let p = HealthSchedulingPolicy::parse(yaml).unwrap();
        assert_eq!(p.rules[1].status, "StorageDegraded");
        assert_eq!(p.rules[1].access_modes, vec!["ReadWriteOnce"]);
    }

    #[test]
    fn a_volume_mode_rule() {
        let p = HealthSchedulingPolicy::parse(
            r#"{"rules":[{"status":"StorageDegraded","volumeMode":"Block"}]}"#,
        )
        .unwrap();
        assert_eq!(p.rules[0].volume_mode.as_deref(), Some("Block"));
    }

    #[test]
    fn bad_values_are_each_named_with_their_path() {
        let err = HealthSchedulingPolicy::parse(
            "rules:\n- status: Unreachable\n  accessModes: [RWO]\n  volumeMode: block\n",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, PolicyError::Invalid(_)), "{text}");
        assert!(text.contains("rules[0].status \"Unreachable\""), "{text}");
        assert!(text.contains("rules[0].accessModes[0] \"RWO\""), "{text}");
        assert!(text.contains("rules[0].volumeMode \"block\""), "{text}");
    }

    #[test]
    fn a_misspelt_field_or_a_missing_rules_list_is_refused() {
        for text in [
            r#"{"rules":[{"status":"StorageDegraded","accessMode":["ReadWriteOnce"]}]}"#,
            r#"{"rule":[{"status":"StorageDegraded"}]}"#,
            "rules: [",
            "",
        ] {
            let err = HealthSchedulingPolicy::parse(text).unwrap_err();
            assert!(matches!(err, PolicyError::Syntax(_)), "{text}: {err}");
        }
    }
}
