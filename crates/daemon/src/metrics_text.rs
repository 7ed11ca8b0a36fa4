//! A prometheus-client registry as exposition text: OpenMetrics, or Prometheus text 0.0.4,
//! both written by prometheus-client's own encoders (the endpoint picks one per request; see
//! [`crate::exposition`]).

use crate::negotiation::Format;
use prometheus_client::registry::Registry;

/// The `Content-Type` of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Encodes every metric of `registry` in OpenMetrics text, ending with `# EOF`; empty if
/// encoding fails (it only can on a broken writer).
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    if prometheus_client::encoding::text::encode(&mut out, registry).is_err() {
        out.clear();
    }
    out
}

/// Encodes every metric of `registry` in `format`, without OpenMetrics' `# EOF`, so that other
/// families can follow; empty if encoding fails.
pub fn encode_as(registry: &Registry, format: Format) -> String {
    let mut out = String::new();
    let written = match format {
        Format::OpenMetrics => {
            prometheus_client::encoding::text::encode_registry(&mut out, registry)
        }
        Format::PrometheusText => {
            prometheus_client::encoding::prometheus_text::encode(&mut out, registry)
        }
    };
    if written.is_err() {
        out.clear();
    }
    out
}

/// One component's metric families: registered once, at start, and encoded for its
/// `/metrics` page and its tests.
#[derive(Debug, Default)]
pub struct Families(Registry);

impl From<Registry> for Families {
    fn from(registry: Registry) -> Self {
        Families(registry)
    }
}

impl Families {
    /// The registry to register the component's families in.
    pub fn registry(&mut self) -> &mut Registry {
        &mut self.0
    }

    /// Every family in OpenMetrics text, as [`encode`] writes it (the tests read it).
    pub fn encode(&self) -> String {
        encode(&self.0)
    }

    /// Every family in `format`, as [`encode_as`] writes it, for the `/metrics` page.
    pub fn encode_as(&self, format: Format) -> String {
        encode_as(&self.0, format)
    }
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
    use prometheus_client::registry::Unit;

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

    /// The metric name a sample line starts with.
    fn sample_name(line: &str) -> &str {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        &line[..end]
    }

    fn text() -> String {
        encode_as(&registry(), Format::PrometheusText)
    }

    #[test]
    fn counters_are_named_after_their_samples() {
        let text = text();
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
        let text = text();
        for expected in [
            "# TYPE things gauge\nthings 7\n",
            "# TYPE probe_duration_seconds histogram\n",
            "probe_duration_seconds_bucket{le=\"1\"} 1\n",
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
        let text = text();
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
    fn label_values_are_escaped_alike_in_both_formats() {
        let mut r = Registry::default();
        let probes = Fam::<Labels, Counter>::default();
        r.register("odd", "Odd labels", probes.clone());
        probes
            .get_or_create(&Labels {
                result: "a\"b\\c\nd".into(),
            })
            .inc();
        for format in [Format::PrometheusText, Format::OpenMetrics] {
            let text = encode_as(&r, format);
            assert!(
                text.contains("odd_total{result=\"a\\\"b\\\\c\\nd\"} 1\n"),
                "{format:?}: {text}"
            );
        }
    }

    #[test]
    fn openmetrics_without_eof_so_families_can_follow() {
        let text = encode_as(&registry(), Format::OpenMetrics);
        assert!(text.contains("# TYPE csi_probe counter\n"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
        assert_eq!(encode_as(&Registry::default(), Format::PrometheusText), "");
    }
}
