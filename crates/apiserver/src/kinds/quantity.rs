//! Resource quantities (`1Gi`, `500m`, `1e3`): checked on save where the v1 types hold them,
//! since the generated types keep any string and `kubectl describe` fails on a bad one.

use crate::errors::Cause;
use crate::registry::Printer;
use serde_json::Value;

/// Whether `s` is a Kubernetes quantity: a signed decimal number, then an optional binary
/// (`Ki`…`Ei`) or decimal (`n`, `u`, `m`, `k`, `M`…`E`) suffix or a decimal exponent.
pub fn is_quantity(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(digits_end);
    let dots = number.matches('.').count();
    if number.is_empty() || number == "." || dots > 1 {
        return false;
    }
    match suffix {
        "" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => true,
        exp => exp
            .strip_prefix(['e', 'E'])
            .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())),
    }
}

fn check_map(map: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let Some(map) = map.and_then(Value::as_object) else {
        return;
    };
    for (k, v) in map {
        let q = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if !is_quantity(&q) {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("{path}[{k}]"),
                format!("Invalid value: \"{q}\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
            ));
        }
    }
}

/// Checks the quantities of PVCs, PVs, Nodes and pod containers.
pub fn check(printer: Printer, obj: &Value, causes: &mut Vec<Cause>) {
    match printer {
        Printer::Pvc => {
            for part in ["requests", "limits"] {
                let p = format!("spec.resources.{part}");
                check_map(obj.pointer(&format!("/spec/resources/{part}")), &p, causes);
            }
            check_map(obj.pointer("/status/capacity"), "status.capacity", causes);
        }
        Printer::Pv => check_map(obj.pointer("/spec/capacity"), "spec.capacity", causes),
        Printer::Node => {
            check_map(obj.pointer("/status/capacity"), "status.capacity", causes);
            check_map(
                obj.pointer("/status/allocatable"),
                "status.allocatable",
                causes,
            );
        }
        Printer::Pod => {
            for list in ["containers", "initContainers"] {
                let Some(cs) = obj
                    .pointer(&format!("/spec/{list}"))
                    .and_then(Value::as_array)
                else {
                    continue;
                };
                for (i, c) in cs.iter().enumerate() {
                    for part in ["requests", "limits"] {
                        let p = format!("spec.{list}[{i}].resources.{part}");
                        check_map(c.pointer(&format!("/resources/{part}")), &p, causes);
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::is_quantity;

    #[test]
    fn quantities() {
        for ok in [
            "1Gi", "500m", "1", "0.5", "+2k", "1e3", "1E-2", ".5", "10Mi", "3",
        ] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "abc", "1GB", "1..2", "Gi", "1e", "1 Gi", "--1", "."] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }
}
