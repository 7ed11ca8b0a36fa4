//! A component's `/metrics` page: its own families, build info and process metrics, in the
//! format the client negotiated.

use crate::build_info::BuildInfoCollector;
use crate::metrics_text::encode_as;
use crate::negotiation::{Format, negotiate};
use crate::process_metrics::ProcessCollector;
use prometheus_client::registry::Registry;

/// The answer to one `/metrics` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// `Content-Type` of `body`.
    pub content_type: &'static str,
    /// The exposition.
    pub body: String,
}

/// Builds the page for a request with this `Accept` header: the component's own families, as
/// `component` encodes them in the negotiated format (for instance with
/// [`crate::metrics_text::encode_as`]; an OpenMetrics `# EOF` is dropped, and it may be empty),
/// then build info and process metrics.
pub fn page(accept: Option<&str>, component: impl FnOnce(Format) -> String) -> Page {
    let format = negotiate(accept);
    let own = component(format);
    let mut body = String::with_capacity(own.len() + 2048);
    for line in own.lines().filter(|l| *l != "# EOF") {
        body.push_str(line);
        body.push('\n');
    }
    let mut standard = Registry::default();
    standard.register_collector(Box::new(BuildInfoCollector));
    standard.register_collector(Box::new(ProcessCollector));
    body.push_str(&encode_as(&standard, format));
    if format == Format::OpenMetrics {
        body.push_str("# EOF\n");
    }
    Page {
        content_type: format.content_type(),
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component with one counter, `hits`, at 3, in `format`.
    fn own(format: Format) -> String {
        let mut registry = Registry::default();
        let hits = prometheus_client::metrics::counter::Counter::<u64>::default();
        hits.inc_by(3);
        registry.register("hits", "Hits", hits);
        encode_as(&registry, format)
    }

    #[test]
    fn text_by_default_with_build_and_process_families() {
        let p = page(None, own);
        assert_eq!(p.content_type, crate::negotiation::PROMETHEUS_TEXT);
        assert!(
            p.body
                .starts_with("# HELP hits_total Hits.\n# TYPE hits_total counter\nhits_total 3\n"),
            "{}",
            p.body
        );
        assert!(p.body.contains("\nvolhealth_build_info{"), "{}", p.body);
        assert!(
            p.body
                .contains("# TYPE process_cpu_seconds_total counter\n"),
            "{}",
            p.body
        );
        assert!(!p.body.contains("EOF"), "{}", p.body);
    }

    #[test]
    fn openmetrics_when_asked_with_one_eof_at_the_end() {
        let p = page(Some("application/openmetrics-text"), own);
        assert_eq!(p.content_type, crate::negotiation::OPENMETRICS);
        assert!(
            p.body
                .starts_with("# HELP hits Hits.\n# TYPE hits counter\n"),
            "{}",
            p.body
        );
        assert_eq!(p.body.matches("# EOF").count(), 1, "{}", p.body);
        assert!(p.body.ends_with("\n# EOF\n"), "{}", p.body);
    }

    #[test]
    fn a_component_with_nothing_yet_still_answers_a_page() {
        for accept in [None, Some("application/openmetrics-text")] {
            let p = page(accept, |_| String::new());
            assert!(p.body.contains("volhealth_build_info{"), "{}", p.body);
        }
    }
}
