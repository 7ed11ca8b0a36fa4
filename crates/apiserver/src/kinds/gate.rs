//! The `CSIVolumeHealth` feature gate: with it off, the KEP fields are dropped on save unless the
//! stored object already had them (the standard field-level gate rule).

use crate::registry::{Printer, ResourceDef};
use serde_json::Value;

/// Parsed `--feature-gates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// `CSIVolumeHealth`, on by default.
    pub csi_volume_health: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            csi_volume_health: true,
        }
    }
}

impl FeatureGates {
    /// Parses `Name=bool,Name=bool`; unknown gates are errors.
    pub fn parse(s: &str) -> Result<FeatureGates, volhealth_daemon::feature_gates::GateError> {
        Ok(FeatureGates {
            csi_volume_health: volhealth_daemon::feature_gates::csi_volume_health(s)?,
        })
    }
}

/// The pointer of the gated field of a kind, if it has one.
pub fn gated_field(def: &ResourceDef) -> Option<(&'static str, &'static str)> {
    match def.printer {
        Printer::Pvc => Some(("status", "healthStatus")),
        Printer::Pod => Some(("status", "volumeHealth")),
        Printer::CsiNode => Some(("status", "storageHealth")),
        _ => None,
    }
}

fn present(obj: &Value, parent: &str, field: &str) -> bool {
    obj.get(parent)
        .and_then(|p| p.get(field))
        .is_some_and(|v| !v.is_null())
}

/// Removes the gated field from `new` when the gate is off and `old` did not have it.
pub fn drop_disabled_fields(
    gates: FeatureGates,
    def: &ResourceDef,
    old: Option<&Value>,
    new: &mut Value,
) {
    if gates.csi_volume_health {
        return;
    }
    let Some((parent, field)) = gated_field(def) else {
        return;
    };
    if old.is_some_and(|o| present(o, parent, field)) {
        return;
    }
    if let Some(p) = new.get_mut(parent).and_then(Value::as_object_mut) {
        p.remove(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drop_unless_old_had_it() {
        let def = crate::registry::find("", "v1", "persistentvolumeclaims").unwrap();
        let off = FeatureGates {
            csi_volume_health: false,
        };
        let mut new =
            json!({"status": {"phase": "Bound", "healthStatus": {"healthConditions": []}}});
        drop_disabled_fields(off, def, None, &mut new);
        assert_eq!(new, json!({"status": {"phase": "Bound"}}));
        let old = json!({"status": {"healthStatus": {}}});
        let mut new = json!({"status": {"healthStatus": {"healthConditions": []}}});
        drop_disabled_fields(off, def, Some(&old), &mut new);
        assert!(new["status"]["healthStatus"].is_object());
        assert_eq!(FeatureGates::parse("CSIVolumeHealth=false").unwrap(), off);
        assert!(FeatureGates::parse("Bogus=true").is_err());
    }
}
