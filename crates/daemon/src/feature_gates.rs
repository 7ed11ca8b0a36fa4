//! `--feature-gates` as Kubernetes components spell it (`Name=bool,...`), parsed once for every
//! volhealth component. Values take Go's `strconv.ParseBool` spellings, as Kubernetes does.

use std::collections::BTreeMap;

/// The one gate volhealth knows.
pub const CSI_VOLUME_HEALTH: &str = "CSIVolumeHealth";

/// Parses a Go-style boolean (`1 t T TRUE true True`, `0 f F FALSE false False`).
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A `--feature-gates` value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// An item without `=`.
    #[error("missing bool value for {0:?} (want Name=true|false)")]
    MissingValue(String),
    /// A value that is not a Go boolean.
    #[error("invalid value of {name}={value}: must be true or false")]
    InvalidValue {
        /// The gate.
        name: String,
        /// What was given.
        value: String,
    },
    /// A gate this component does not know.
    #[error("unrecognized feature gate {name:?} (known: {known})")]
    Unknown {
        /// The gate.
        name: String,
        /// The known gates, comma-separated.
        known: String,
    },
}

/// Parses `--feature-gates`; every name must be one of `known`.
pub fn parse(input: &str, known: &[&str]) -> Result<BTreeMap<String, bool>, GateError> {
    let mut gates = BTreeMap::new();
    for item in input.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| GateError::MissingValue(item.to_string()))?;
        let (name, value) = (name.trim(), value.trim());
        let value = parse_bool(value).ok_or_else(|| GateError::InvalidValue {
            name: name.to_string(),
            value: value.to_string(),
        })?;
        if !known.contains(&name) {
            return Err(GateError::Unknown {
                name: name.to_string(),
                known: known.join(", "),
            });
        }
        gates.insert(name.to_string(), value);
    }
    Ok(gates)
}

/// Whether `CSIVolumeHealth` is on in `input` (on unless turned off).
pub fn csi_volume_health(input: &str) -> Result<bool, GateError> {
    Ok(parse(input, &[CSI_VOLUME_HEALTH])?
        .get(CSI_VOLUME_HEALTH)
        .copied()
        .unwrap_or(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_as_kubernetes_accepts_them() {
        assert_eq!(csi_volume_health(""), Ok(true));
        assert_eq!(csi_volume_health("CSIVolumeHealth=true"), Ok(true));
        assert_eq!(csi_volume_health(" CSIVolumeHealth=False "), Ok(false));
        assert_eq!(csi_volume_health("CSIVolumeHealth=0"), Ok(false));
        assert_eq!(csi_volume_health("CSIVolumeHealth=T"), Ok(true));
        assert!(csi_volume_health("CSIVolumeHealth=maybe").is_err());
        assert!(csi_volume_health("CSIVolumeHealth=fALSE").is_err());
        assert!(csi_volume_health("Other=true").is_err());
        assert!(csi_volume_health("CSIVolumeHealth").is_err());
    }
}
