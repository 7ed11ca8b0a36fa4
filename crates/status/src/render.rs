//! Rendering findings: a table for people (optionally coloured), JSON and YAML for scripts.

use crate::coverage::{self, VolumeCoverage};
use crate::error::{Error, Result};
use crate::findings::Finding;
use jiff::Timestamp;
use serde::Serialize;

/// Output format (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns: namespace, object, source, status, reason, age, message.
    Table,
    /// The table plus node, volume, claim, driver and storage modes; messages are not shortened.
    Wide,
    /// The documented JSON document.
    Json,
    /// The same document as YAML.
    Yaml,
}

/// `apiVersion` of the machine-readable document; bumped on any incompatible change.
pub const REPORT_API_VERSION: &str = "volhealth.io/v1alpha1";
/// `kind` of the machine-readable document.
pub const REPORT_KIND: &str = "HealthReport";

/// The `-o json|yaml` document.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report<'a> {
    /// Always [`REPORT_API_VERSION`].
    pub api_version: &'static str,
    /// Always [`REPORT_KIND`].
    pub kind: &'static str,
    /// The namespace that was looked at; `null` with `-A`.
    pub namespace: Option<&'a str>,
    /// When the API was read.
    pub generated_at: String,
    /// True when `items` is empty and nothing in `warnings` says health could not be shown.
    pub healthy: bool,
    /// Every unhealthy condition.
    pub items: &'a [Finding],
    /// Every bound claim in scope and which source watches it on each side.
    pub volumes: &'a [VolumeCoverage],
    /// Why the items may not be the whole story, e.g. the API server drops the health fields
    /// (left out when there is none).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub warnings: &'a [String],
}

/// Renders the machine-readable document (JSON pretty-printed unless `one_line`), with
/// `warnings` (which make `healthy` false). Volumes nothing watches add a warning of their own.
pub fn document(
    findings: &[Finding],
    volumes: &[VolumeCoverage],
    namespace: Option<&str>,
    now: Timestamp,
    format: Format,
    one_line: bool,
    warnings: &[String],
) -> Result<String> {
    let mut warnings = warnings.to_vec();
    warnings.extend(coverage::warning(volumes));
    let report = Report {
        api_version: REPORT_API_VERSION,
        kind: REPORT_KIND,
        namespace,
        generated_at: now.to_string(),
        healthy: findings.is_empty() && warnings.is_empty(),
        items: findings,
        volumes,
        warnings: &warnings,
    };
    Ok(match format {
        Format::Yaml => serde_saphyr::to_string(&report).map_err(|e| Error::Encode {
            format: "YAML",
            reason: e.to_string(),
        })?,
        _ => {
            let encoded = if one_line {
                serde_json::to_string(&report)
            } else {
                serde_json::to_string_pretty(&report)
            };
            let mut s = encoded.map_err(|e| Error::Encode {
                format: "JSON",
                reason: e.to_string(),
            })?;
            s.push('\n');
            s
        }
    })
}

/// Age in kubectl's style: `45s`, `3m12s`, `17m`, `5h3m`, `30h`, `3d4h`, `12d`.
pub fn age(since: Option<Timestamp>, now: Timestamp) -> String {
    let Some(since) = since else {
        return "<unknown>".into();
    };
    let secs = now.as_second().saturating_sub(since.as_second()).max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        format!("{m}m{}s", secs % 60)
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        format!("{h}h{}m", m % 60)
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        format!("{d}d{}h", h % 24)
    } else {
        format!("{d}d")
    }
}

/// ANSI colour of a status: red when the data can't be used, yellow when it works worse,
/// magenta for statuses this version does not know.
fn colour(status: &str) -> &'static str {
    match status {
        "Inaccessible" | "DataLoss" | "StorageUnreachable" => "\x1b[31m",
        "Degraded" | "StorageDegraded" => "\x1b[33m",
        _ => "\x1b[35m",
    }
}

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
/// Messages longer than this are shortened in the plain table (never in `wide`).
const SHORT_MESSAGE: usize = 72;

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn dash(s: Option<&str>) -> String {
    s.filter(|s| !s.is_empty()).unwrap_or("-").to_string()
}

/// Renders the table (`wide` adds columns). With `colour`, the STATUS cells and the header are
/// coloured; padding is computed on the plain text so columns stay aligned.
pub fn table(findings: &[Finding], now: Timestamp, wide: bool, colour_on: bool) -> String {
    let mut header = vec!["NAMESPACE", "OBJECT", "SOURCE", "STATUS", "REASON", "AGE"];
    if wide {
        header.extend(["NODE", "VOLUME", "CLAIM", "DRIVER", "MODES"]);
    }
    header.push("MESSAGE");
    let status_col = 3;
    let rows: Vec<Vec<String>> = findings
        .iter()
        .map(|f| {
            let mut row = vec![
                dash(f.namespace.as_deref()),
                f.object(),
                f.source.as_str().to_string(),
                f.status.clone(),
                f.reason.clone(),
                age(f.since(), now),
            ];
            if wide {
                let modes = match (&f.access_mode, &f.volume_mode) {
                    (None, None) => None,
                    (a, v) => Some(format!(
                        "{}/{}",
                        a.as_deref().unwrap_or("*"),
                        v.as_deref().unwrap_or("*")
                    )),
                };
                row.extend([
                    dash(f.node.as_deref()),
                    dash(f.pod_volume.as_deref()),
                    dash(f.claim.as_deref()),
                    dash(f.driver.as_deref()),
                    dash(modes.as_deref()),
                ]);
            }
            let msg = one_line(&f.message);
            row.push(if wide {
                msg
            } else {
                shorten(&msg, SHORT_MESSAGE)
            });
            row
        })
        .collect();
    grid(&header, rows, colour_on, |i, cell| {
        (i == status_col).then(|| colour(cell))
    })
}

/// Aligned columns under `header`; with `colour_on` the header is bold and a cell is painted
/// with what `paint(column, cell)` gives. Padding is computed on the plain text.
fn grid(
    header: &[&str],
    rows: Vec<Vec<String>>,
    colour_on: bool,
    paint: impl Fn(usize, &str) -> Option<&'static str>,
) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let last = header.len() - 1;
    let mut out = String::new();
    let line = |cells: Vec<String>, is_header: bool, out: &mut String| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = if i == last {
                0
            } else {
                widths[i] - cell.chars().count() + 3
            };
            let painted = match (colour_on, is_header, paint(i, cell)) {
                (true, true, _) => format!("{BOLD}{cell}{RESET}"),
                (true, false, Some(c)) => format!("{c}{cell}{RESET}"),
                _ => cell.clone(),
            };
            text.push_str(&painted);
            text.push_str(&" ".repeat(pad));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(
        header.iter().map(|h| h.to_string()).collect(),
        true,
        &mut out,
    );
    for row in rows {
        line(row, false, &mut out);
    }
    out
}

/// The coverage section printed after the conditions: a blank line, one row per volume (what
/// watches it on the controller side and on its nodes, and what that makes of its health), and
/// a summary line; nothing when there is no volume in scope. `wide` adds the PV.
pub fn coverage_table(volumes: &[VolumeCoverage], wide: bool, colour_on: bool) -> String {
    if volumes.is_empty() {
        return String::new();
    }
    let mut header = vec!["NAMESPACE", "VOLUME", "DRIVER", "CONTROLLER", "NODE"];
    if wide {
        header.push("PV");
    }
    header.push("HEALTH");
    let health_col = header.len() - 1;
    let rows = volumes
        .iter()
        .map(|v| {
            let mut row = vec![
                v.namespace.clone(),
                format!("pvc/{}", v.claim),
                dash(v.driver.as_deref()),
                v.controller.clone(),
                v.node.clone(),
            ];
            if wide {
                row.push(v.persistent_volume.clone());
            }
            row.push(v.health_cell());
            row
        })
        .collect();
    let mut out = String::from("\n");
    let painted = grid(&header, rows, colour_on, |i, cell| {
        if i != health_col {
            return None;
        }
        match cell {
            "healthy" | coverage::UNKNOWN => None,
            "not watched" => Some("\x1b[35m"),
            statuses => Some(colour(statuses.split(',').next().unwrap_or(statuses))),
        }
    });
    out.push_str(&painted);
    out.push_str(&coverage::summary(volumes));
    out.push('\n');
    out
}

/// The line printed instead of an empty table.
pub fn all_healthy(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!(
            "No volume health conditions in namespace {ns} and no storage health conditions on any node.\n"
        ),
        None => "No volume or storage health conditions in the cluster.\n".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Source;

    fn finding(status: &str, message: &str) -> Finding {
        Finding {
            namespace: Some("default".into()),
            kind: "PersistentVolumeClaim".into(),
            name: "data-1".into(),
            source: Source::Controller,
            status: status.into(),
            reason: "VolumeNotFound".into(),
            message: message.into(),
            last_transition_time: Some("2026-01-01T00:00:00Z".into()),
            node: None,
            driver: Some("hostpath.volhealth.io".into()),
            pod_volume: None,
            claim: Some("data-1".into()),
            persistent_volume: Some("pv-1".into()),
            access_mode: None,
            volume_mode: None,
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn ages_read_like_kubectl() {
        let t0 = ts("2026-01-01T00:00:00Z");
        let at = |secs: i64| {
            age(
                Some(t0),
                Timestamp::from_second(t0.as_second() + secs).unwrap(),
            )
        };
        assert_eq!(at(0), "0s");
        assert_eq!(at(119), "119s");
        assert_eq!(at(192), "3m12s");
        assert_eq!(at(17 * 60), "17m");
        assert_eq!(at(5 * 3600 + 180), "5h3m");
        assert_eq!(at(30 * 3600), "30h");
        assert_eq!(at(3 * 86400 + 4 * 3600), "3d4h");
        assert_eq!(at(12 * 86400), "12d");
        assert_eq!(
            at(-5),
            "0s",
            "a clock behind the writer's is not a negative age"
        );
        assert_eq!(age(None, t0), "<unknown>");
    }

    #[test]
    fn table_aligns_columns_and_shortens_messages_unless_wide() {
        let long = "x".repeat(200);
        let f = vec![finding("Inaccessible", "gone"), finding("Degraded", &long)];
        let now = ts("2026-01-01T00:01:00Z");
        let t = table(&f, now, false, false);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[0].starts_with("NAMESPACE   OBJECT       SOURCE       STATUS"),
            "{t}"
        );
        assert!(
            lines[1].contains("pvc/data-1")
                && lines[1].contains("60s")
                && lines[1].ends_with("gone")
        );
        assert!(lines[2].ends_with('…'));
        assert_eq!(lines[1].find("controller"), lines[0].find("SOURCE"));
        assert!(!t.contains('\x1b'), "no colour when asked for none");
        let w = table(&f, now, true, false);
        assert!(w.lines().next().unwrap().contains("DRIVER"));
        assert!(w.contains(&long));
    }

    #[test]
    fn colour_marks_status_without_breaking_alignment() {
        let f = vec![finding("Inaccessible", "gone"), finding("Degraded", "slow")];
        let now = ts("2026-01-01T00:01:00Z");
        let plain = table(&f, now, false, false);
        let coloured = table(&f, now, false, true);
        assert!(coloured.contains("\x1b[31mInaccessible\x1b[0m"));
        assert!(coloured.contains("\x1b[33mDegraded\x1b[0m"));
        let strip = |s: &str| {
            s.replace("\x1b[31m", "")
                .replace("\x1b[33m", "")
                .replace("\x1b[1m", "")
                .replace("\x1b[0m", "")
        };
        assert_eq!(strip(&coloured), plain);
    }

    #[test]
    fn document_has_the_documented_shape() {
        let f = vec![finding("Inaccessible", "gone")];
        let now = ts("2026-01-01T00:01:00Z");
        let doc: serde_json::Value =
            serde_json::from_str(&document(&f, &[], None, now, Format::Json, false, &[]).unwrap())
                .unwrap();
        assert_eq!(doc["apiVersion"], REPORT_API_VERSION);
        assert_eq!(doc["kind"], REPORT_KIND);
        assert_eq!(doc["namespace"], serde_json::Value::Null);
        assert_eq!(doc["healthy"], false);
        let item = &doc["items"][0];
        for key in [
            "namespace",
            "kind",
            "name",
            "source",
            "status",
            "reason",
            "message",
            "lastTransitionTime",
            "node",
            "driver",
            "podVolume",
            "claim",
            "persistentVolume",
            "accessMode",
            "volumeMode",
        ] {
            assert!(item.get(key).is_some(), "items[] lacks {key}: {item}");
        }
        assert_eq!(item["source"], "controller");
        let line = document(&f, &[], None, now, Format::Json, true, &[]).unwrap();
        assert_eq!(line.lines().count(), 1, "one document per line for streams");
        assert!(
            line.starts_with("{\"apiVersion\""),
            "field order is the documented one: {line}"
        );
        let yaml: serde_json::Value = serde_saphyr::from_str(
            &document(&f, &[], Some("default"), now, Format::Yaml, false, &[]).unwrap(),
        )
        .unwrap();
        assert_eq!(yaml["items"][0]["status"], "Inaccessible");
        assert_eq!(yaml["namespace"], "default");
    }

    fn volumes() -> Vec<VolumeCoverage> {
        let snap = crate::coverage::tests::snapshot();
        crate::coverage::collect(&snap, &crate::findings::collect(&snap))
    }

    #[test]
    fn the_coverage_section_shows_each_volume_and_never_an_unwatched_one_as_healthy() {
        let text = coverage_table(&volumes(), false, false);
        assert_eq!(
            text,
            "\n\
NAMESPACE   VOLUME       DRIVER           CONTROLLER   NODE      HEALTH
default     pvc/bare     bare.example     none         none      not watched
default     pvc/legacy   legacy.example   legacy       legacy    healthy
default     pvc/old      old.example      unknown      unknown   unknown
default     pvc/rpc      rpc.example      rpc          rpc       Degraded
4 volumes; controller side: 1 legacy, 1 none, 1 rpc, 1 unknown; node side: 1 legacy, 1 none, 1 rpc, 1 unknown; 1 not watched; 1 unknown.
"
        );
        let wide = coverage_table(&volumes(), true, false);
        assert!(wide.lines().nth(1).unwrap().contains("   PV   "), "{wide}");
        assert_eq!(coverage_table(&[], false, false), "");
        let coloured = coverage_table(&volumes(), false, true);
        assert!(
            coloured.contains("\x1b[35mnot watched\x1b[0m"),
            "{coloured}"
        );
        assert!(coloured.contains("\x1b[33mDegraded\x1b[0m"), "{coloured}");
    }

    #[test]
    fn a_volume_nothing_watches_makes_the_document_unhealthy() {
        let now = ts("2026-01-01T00:01:00Z");
        let v = volumes();
        let doc: serde_json::Value =
            serde_json::from_str(&document(&[], &v, None, now, Format::Json, false, &[]).unwrap())
                .unwrap();
        assert_eq!(doc["healthy"], false);
        assert!(
            doc["warnings"][0]
                .as_str()
                .unwrap()
                .contains("default/bare"),
            "{doc}"
        );
        let bare = &doc["volumes"][0];
        assert_eq!(bare["claim"], "bare");
        assert_eq!(bare["controller"], "none");
        assert_eq!(bare["node"], "none");
        assert_eq!(bare["health"], "notWatched");
        assert_eq!(
            doc["volumes"][3]["statuses"],
            serde_json::json!(["Degraded"])
        );
        let watched: Vec<VolumeCoverage> = v.into_iter().filter(|v| v.claim != "bare").collect();
        let doc: serde_json::Value = serde_json::from_str(
            &document(&[], &watched, None, now, Format::Json, false, &[]).unwrap(),
        )
        .unwrap();
        assert_eq!(doc["healthy"], true, "unknown is not a warning: {doc}");
    }
}
