//! OpenMetrics text (what prometheus-client writes) rewritten as Prometheus text 0.0.4.
//!
//! The two differ in how a family is named: OpenMetrics names a counter `x` and its sample
//! `x_total`, while 0.0.4 names the family after its sample, so `# HELP`/`# TYPE` must say
//! `x_total` there or a 0.0.4 parser sees an untyped `x_total` without help. 0.0.4 also has
//! no `info` type, no `# UNIT`, no exemplars and no `# EOF`, and writes timestamps in
//! milliseconds.

use std::fmt::Write as _;

/// One metric family as read from OpenMetrics text.
#[derive(Debug, Default)]
struct Family {
    name: String,
    help: Option<String>,
    kind: Option<String>,
    samples: Vec<String>,
}

impl Family {
    fn named(name: &str) -> Family {
        Family {
            name: name.to_string(),
            ..Family::default()
        }
    }

    /// The suffixes an OpenMetrics family of this type gives its samples.
    fn suffixes(&self) -> &'static [&'static str] {
        match self.kind.as_deref() {
            Some("counter") => &["_total", "_created"],
            Some("histogram") => &["_bucket", "_sum", "_count", "_created"],
            Some("gaugehistogram") => &["_bucket", "_gsum", "_gcount"],
            Some("summary") => &["", "_sum", "_count", "_created"],
            Some("info") => &["_info"],
            _ => &[""],
        }
    }

    fn owns(&self, sample: &str) -> bool {
        sample
            .strip_prefix(self.name.as_str())
            .is_some_and(|suffix| self.suffixes().contains(&suffix))
    }

    /// The 0.0.4 family name and type.
    fn text_name_and_type(&self) -> (String, &'static str) {
        match self.kind.as_deref() {
            Some("counter") if !self.name.ends_with("_total") => {
                (format!("{}_total", self.name), "counter")
            }
            Some("counter") => (self.name.clone(), "counter"),
            Some("gauge") => (self.name.clone(), "gauge"),
            Some("histogram") => (self.name.clone(), "histogram"),
            Some("summary") => (self.name.clone(), "summary"),
            Some("info") => (format!("{}_info", self.name), "gauge"),
            Some("stateset") => (self.name.clone(), "gauge"),
            _ => (self.name.clone(), "untyped"),
        }
    }

    fn write_text(&self, out: &mut String) {
        let (name, kind) = self.text_name_and_type();
        if let Some(help) = &self.help {
            let _ = writeln!(out, "# HELP {name} {}", help.replace("\\\"", "\""));
        }
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let drop_created = matches!(
            self.kind.as_deref(),
            Some("counter" | "histogram" | "summary")
        );
        let created = format!("{}_created", self.name);
        for sample in &self.samples {
            if drop_created && sample_name(sample) == created {
                continue;
            }
            out.push_str(&text_sample(sample));
            out.push('\n');
        }
    }
}

/// The metric name a sample line starts with.
fn sample_name(line: &str) -> &str {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    &line[..end]
}

/// Where the label set of a sample line ends (just past `}`), honouring quoted values.
fn labels_end(line: &str) -> usize {
    let bytes = line.as_bytes();
    let start = sample_name(line).len();
    if bytes.get(start) != Some(&b'{') {
        return start;
    }
    let (mut quoted, mut escaped) = (false, false);
    for (i, &b) in bytes.iter().enumerate().skip(start + 1) {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b'}' if !quoted => return i + 1,
            _ => {}
        }
    }
    line.len()
}

/// A sample line without its exemplar and with a millisecond timestamp.
fn text_sample(line: &str) -> String {
    let split = labels_end(line);
    let (series, rest) = line.split_at(split);
    let rest = rest.split(" # ").next().unwrap_or_default();
    let mut fields = rest.split_whitespace();
    let value = fields.next().unwrap_or("NaN");
    match fields.next().and_then(|t| t.parse::<f64>().ok()) {
        Some(seconds) => format!("{series} {value} {}", (seconds * 1000.0).round() as i64),
        None => format!("{series} {value}"),
    }
}

/// Rewrites OpenMetrics text as Prometheus text format 0.0.4.
pub fn from_openmetrics(openmetrics: &str) -> String {
    let mut families: Vec<Family> = Vec::new();
    for line in openmetrics.lines() {
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let (keyword, name, value) = (parts.next(), parts.next(), parts.next());
            let (Some(keyword), Some(name)) = (keyword, name) else {
                continue;
            };
            if keyword != "HELP" && keyword != "TYPE" {
                continue; // UNIT, EOF and comments have no 0.0.4 form.
            }
            if families.last().is_none_or(|f| f.name != name) {
                families.push(Family::named(name));
            }
            if let Some(family) = families.last_mut() {
                let value = value.unwrap_or_default().to_string();
                if keyword == "HELP" {
                    family.help = Some(value);
                } else {
                    family.kind = Some(value);
                }
            }
        } else if !line.trim().is_empty() && !line.starts_with('#') {
            let name = sample_name(line);
            if families.last().is_none_or(|f| !f.owns(name)) {
                families.push(Family::named(name));
            }
            if let Some(family) = families.last_mut() {
                family.samples.push(line.to_string());
            }
        }
    }
    let mut out = String::new();
    for family in &families {
        family.write_text(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::EncodeLabelSet;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::exemplar::CounterWithExemplar;
    use prometheus_client::metrics::family::Family as Fam;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::metrics::info::Info;
    use prometheus_client::registry::{Registry, Unit};

    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct Labels {
        result: String,
    }

    fn registry() -> Registry {
        let mut r = Registry::default();
        let probes = Fam::<Labels, Counter>::default();
        r.register("csi_probe", "Probes", probes.clone());
        probes
            .get_or_create(&Labels {
                result: "a \"quoted\" } # {value}".into(),
            })
            .inc_by(2);
        let g = Gauge::<i64>::default();
        g.set(7);
        r.register("things", "Things", g);
        let h = Histogram::new([0.1, 1.0]);
        h.observe(0.5);
        r.register_with_unit("probe_duration", "Durations", Unit::Seconds, h);
        r.register(
            "volhealth_build",
            "Build",
            Info::new(vec![("version".to_string(), "1".to_string())]),
        );
        let ex = CounterWithExemplar::<Labels>::default();
        ex.inc_by(
            3,
            Some(Labels {
                result: "trace".into(),
            }),
            Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000)),
        );
        r.register("with_exemplar", "Exemplars", ex);
        r
    }

    fn openmetrics() -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry()).unwrap();
        out
    }

    #[test]
    fn counters_are_named_after_their_samples() {
        let text = from_openmetrics(&openmetrics());
        assert!(text.contains("# HELP csi_probe_total Probes"), "{text}");
        assert!(text.contains("# TYPE csi_probe_total counter\n"), "{text}");
        assert!(!text.contains("TYPE csi_probe counter"), "{text}");
        assert!(
            text.contains("csi_probe_total{result=\"a \\\"quoted\\\" } # {value}\"} 2\n"),
            "{text}"
        );
    }

    #[test]
    fn other_types_keep_their_names_and_lose_what_text_lacks() {
        let text = from_openmetrics(&openmetrics());
        for expected in [
            "# TYPE things gauge\nthings 7\n",
            "# TYPE probe_duration_seconds histogram\n",
            "probe_duration_seconds_bucket{le=\"1.0\"} 1\n",
            "probe_duration_seconds_count 1\n",
            "# TYPE volhealth_build_info gauge\nvolhealth_build_info{version=\"1\"} 1\n",
            "# TYPE with_exemplar_total counter\nwith_exemplar_total 3\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
        for absent in ["# EOF", "# UNIT", "trace", "_created"] {
            assert!(!text.contains(absent), "{absent:?} in:\n{text}");
        }
    }

    #[test]
    fn every_sample_follows_the_type_line_of_its_own_name() {
        let text = from_openmetrics(&openmetrics());
        let mut typed = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed = rest.split(' ').next().unwrap().to_string();
            } else if !line.starts_with('#') {
                let name = sample_name(line);
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .filter(|b| *b == typed)
                    .unwrap_or(name);
                assert_eq!(base, typed, "{line} under TYPE {typed}");
            }
        }
    }

    #[test]
    fn timestamps_become_milliseconds_and_empty_stays_empty() {
        let om = "# HELP t T\n# TYPE t gauge\nt{a=\"b\"} 1 1700000000.5\n# EOF\n";
        assert_eq!(
            from_openmetrics(om),
            "# HELP t T\n# TYPE t gauge\nt{a=\"b\"} 1 1700000000500\n"
        );
        assert_eq!(from_openmetrics("# EOF\n"), "");
        assert_eq!(from_openmetrics(""), "");
    }

    #[test]
    fn families_without_samples_keep_their_metadata() {
        let om = "# HELP x Xs.\n# TYPE x counter\n# HELP y Ys.\n# TYPE y gauge\n# EOF\n";
        assert_eq!(
            from_openmetrics(om),
            "# HELP x_total Xs.\n# TYPE x_total counter\n# HELP y Ys.\n# TYPE y gauge\n"
        );
    }
}
