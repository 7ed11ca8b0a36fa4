//! A component's `/metrics` page: its own families, build info and process metrics, in the
//! format the client negotiated.

use crate::negotiation::{Format, negotiate};
use crate::{build_info, process_metrics, prometheus_text};

/// The answer to one `/metrics` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// `Content-Type` of `body`.
    pub content_type: &'static str,
    /// The exposition.
    pub body: String,
}

/// Builds the page for a request with this `Accept` header from the component's own
/// families in OpenMetrics text (prometheus-client's output; `# EOF` optional, may be empty).
pub fn page(accept: Option<&str>, component_openmetrics: &str) -> Page {
    let format = negotiate(accept);
    let mut openmetrics = String::with_capacity(component_openmetrics.len() + 2048);
    for line in component_openmetrics.lines().filter(|l| *l != "# EOF") {
        openmetrics.push_str(line);
        openmetrics.push('\n');
    }
    openmetrics.push_str(&build_info::openmetrics());
    openmetrics.push_str(&process_metrics::openmetrics());
    let body = match format {
        Format::OpenMetrics => {
            openmetrics.push_str("# EOF\n");
            openmetrics
        }
        Format::PrometheusText => prometheus_text::from_openmetrics(&openmetrics),
    };
    Page {
        content_type: format.content_type(),
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str = "# HELP hits Hits.\n# TYPE hits counter\nhits_total 3\n# EOF\n";

    #[test]
    fn text_by_default_with_build_and_process_families() {
        let p = page(None, OWN);
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
        let p = page(Some("application/openmetrics-text"), OWN);
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
            let p = page(accept, "");
            assert!(p.body.contains("volhealth_build_info{"), "{}", p.body);
        }
    }
}
