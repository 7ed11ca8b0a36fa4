//! Which exposition format a scraper gets: Prometheus text 0.0.4 unless it asks for OpenMetrics.

/// An exposition format of `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4: what `promtool check metrics`, curl and older scrapers read.
    PrometheusText,
    /// OpenMetrics text 1.0.0, served only to clients whose `Accept` prefers it.
    OpenMetrics,
}

/// `Content-Type` of Prometheus text 0.0.4.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// `Content-Type` of OpenMetrics text 1.0.0.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

impl Format {
    /// The `Content-Type` to answer with.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::PrometheusText => PROMETHEUS_TEXT,
            Format::OpenMetrics => OPENMETRICS,
        }
    }
}

/// The quality a client gave `wanted` in one media range, if the range covers it
/// (`exact_only`: only a range that names it, not a wildcard).
fn quality(range: &str, wanted: &str, exact_only: bool) -> Option<f32> {
    let mut parts = range.split(';').map(str::trim);
    let media = parts.next()?.to_ascii_lowercase();
    let exact = media == wanted;
    let wildcard = media == "*/*"
        || media
            .strip_suffix("/*")
            .is_some_and(|t| wanted.starts_with(&format!("{t}/")));
    if !(exact || (wildcard && !exact_only)) {
        return None;
    }
    let q = parts
        .filter_map(|p| p.strip_prefix("q="))
        .find_map(|q| q.trim().parse::<f32>().ok())
        .unwrap_or(1.0);
    Some(q.clamp(0.0, 1.0))
}

/// The best quality any range of `accept` gives `wanted` (0 when none covers it).
fn best(accept: &str, wanted: &str, exact_only: bool) -> f32 {
    accept
        .split(',')
        .filter_map(|r| quality(r, wanted, exact_only))
        .fold(0.0, f32::max)
}

/// Picks the format for a request's `Accept` header: OpenMetrics only when the client names it
/// and ranks it at least as high as plain text; everything else gets 0.0.4.
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::PrometheusText;
    };
    let openmetrics = best(accept, "application/openmetrics-text", true);
    let text = best(accept, "text/plain", false);
    if openmetrics > 0.0 && openmetrics >= text {
        Format::OpenMetrics
    } else {
        Format::PrometheusText
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_clients_get_text() {
        for accept in [
            None,
            Some(""),
            Some("*/*"),
            Some("text/plain"),
            Some("text/plain;version=0.0.4"),
            Some("text/plain;version=0.0.4;q=0.9,*/*;q=0.1"),
            Some("application/json"),
        ] {
            assert_eq!(negotiate(accept), Format::PrometheusText, "{accept:?}");
        }
    }

    #[test]
    fn clients_that_prefer_openmetrics_get_it() {
        for accept in [
            "application/openmetrics-text",
            "application/openmetrics-text; version=1.0.0",
            // What Prometheus sends by default.
            "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
            "text/plain;q=0.5, application/openmetrics-text",
        ] {
            assert_eq!(negotiate(Some(accept)), Format::OpenMetrics, "{accept}");
        }
    }

    #[test]
    fn openmetrics_ranked_lower_or_refused_gets_text() {
        for accept in [
            "application/openmetrics-text;q=0.2,text/plain;q=0.9",
            "application/openmetrics-text;q=0",
            "application/*",
        ] {
            assert_eq!(negotiate(Some(accept)), Format::PrometheusText, "{accept}");
        }
    }
}
