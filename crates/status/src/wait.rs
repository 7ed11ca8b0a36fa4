//! `status --wait-for`: wait until the cluster shows what the user expects (a condition that the
//! next probe will write, or its clearing), then print as usual. A step of a walkthrough that
//! depends on the next probe then shows its result instead of an empty table.

use crate::findings::Finding;
use std::fmt;

/// What one `--wait-for` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expectation {
    /// `KIND/NAME=REASON`: that object shows a condition with that reason.
    Reason {
        /// The object in kubectl's short form (`pvc/data-1`, `pod/web-2`, `csinode/node-3`).
        object: String,
        /// The reason to see.
        reason: String,
    },
    /// `KIND/NAME=healthy`: that object shows no condition.
    ObjectHealthy {
        /// The object in kubectl's short form.
        object: String,
    },
    /// `healthy`: nothing in scope shows a condition.
    AllHealthy,
}

/// A `--wait-for` value that is not `KIND/NAME=REASON`, `KIND/NAME=healthy` or `healthy`; the
/// message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

/// The word that stands for "no condition".
const HEALTHY: &str = "healthy";

/// `kind/name` with the kind in the short form `status` prints (`pvc`, `pod`, `csinode`).
fn normalise_object(object: &str) -> Result<String, ParseError> {
    let (kind, name) = object
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| {
            ParseError(format!(
                "expected KIND/NAME (e.g. pvc/data-1), got {object:?}"
            ))
        })?;
    let short = match kind.to_ascii_lowercase().as_str() {
        "pvc" | "pvcs" | "persistentvolumeclaim" | "persistentvolumeclaims" => "pvc",
        "pod" | "pods" | "po" => "pod",
        "csinode" | "csinodes" => "csinode",
        other => {
            return Err(ParseError(format!(
                "{other:?} is not a kind `status` shows; use pvc, pod or csinode"
            )));
        }
    };
    Ok(format!("{short}/{name}"))
}

impl Expectation {
    /// Parses `KIND/NAME=REASON`, `KIND/NAME=healthy` or `healthy`.
    pub fn parse(text: &str) -> Result<Expectation, ParseError> {
        let text = text.trim();
        if text == HEALTHY {
            return Ok(Expectation::AllHealthy);
        }
        let (object, reason) = text.split_once('=').ok_or_else(|| {
            ParseError(format!(
                "expected KIND/NAME=REASON, KIND/NAME=healthy or healthy (e.g. pvc/data-1=VolumeNotFound), got {text:?}"
            ))
        })?;
        let object = normalise_object(object)?;
        match reason {
            "" => Err(ParseError(format!("{text:?} names no reason"))),
            HEALTHY => Ok(Expectation::ObjectHealthy { object }),
            reason => Ok(Expectation::Reason {
                object,
                reason: reason.to_string(),
            }),
        }
    }

    /// Whether `findings` show what this asks for.
    pub fn met(&self, findings: &[Finding]) -> bool {
        match self {
            Expectation::Reason { object, reason } => findings
                .iter()
                .any(|f| &f.reason == reason && &f.object() == object),
            Expectation::ObjectHealthy { object } => {
                !findings.iter().any(|f| &f.object() == object)
            }
            Expectation::AllHealthy => findings.is_empty(),
        }
    }
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expectation::Reason { object, reason } => write!(f, "{object}={reason}"),
            Expectation::ObjectHealthy { object } => write!(f, "{object}={HEALTHY}"),
            Expectation::AllHealthy => f.write_str(HEALTHY),
        }
    }
}

impl std::str::FromStr for Expectation {
    type Err = ParseError;

    /// One `--wait-for` value, as [`Expectation::parse`] reads it.
    fn from_str(text: &str) -> Result<Expectation, ParseError> {
        Expectation::parse(text)
    }
}

/// The expectations `findings` do not meet yet.
pub fn unmet<'a>(expected: &'a [Expectation], findings: &[Finding]) -> Vec<&'a Expectation> {
    expected.iter().filter(|e| !e.met(findings)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Source;

    fn finding(kind: &str, name: &str, reason: &str) -> Finding {
        Finding {
            namespace: Some("default".into()),
            ..Finding::of_condition(
                kind,
                name,
                Source::Controller,
                ("Inaccessible", reason, None),
            )
        }
    }

    #[test]
    fn each_form_parses_and_kinds_are_normalised() {
        assert_eq!(
            Expectation::parse("persistentvolumeclaim/data-1=VolumeNotFound").unwrap(),
            Expectation::Reason {
                object: "pvc/data-1".into(),
                reason: "VolumeNotFound".into()
            }
        );
        assert_eq!(
            Expectation::parse("pods/web-2=healthy").unwrap(),
            Expectation::ObjectHealthy {
                object: "pod/web-2".into()
            }
        );
        assert_eq!(
            Expectation::parse("healthy").unwrap(),
            Expectation::AllHealthy
        );
        for bad in ["pvc/data-1", "data-1=X", "svc/x=Y", "pvc/=X", "pvc/a="] {
            assert!(Expectation::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn expectations_are_met_only_by_what_they_name() {
        let findings = vec![
            finding("PersistentVolumeClaim", "data-1", "VolumeNotFound"),
            finding("CSINode", "node-3", "NetworkPartition"),
        ];
        let met = |s: &str| Expectation::parse(s).unwrap().met(&findings);
        assert!(met("pvc/data-1=VolumeNotFound"));
        assert!(met("csinode/node-3=NetworkPartition"));
        assert!(!met("pvc/data-1=SlowIo"));
        assert!(!met("pod/data-1=VolumeNotFound"));
        assert!(met("pvc/data-2=healthy"));
        assert!(!met("pvc/data-1=healthy"));
        assert!(!met("healthy"));
        assert!(Expectation::AllHealthy.met(&[]));
    }
}
