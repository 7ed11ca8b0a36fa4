//! `volhealth_build_info{component,version,revision} 1` and `--version`: which build of which
//! component is running.

use crate::negotiation::Format;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::sync::OnceLock;

/// The git revision the binary was built from (`unknown` when neither git nor the build said).
pub const REVISION: &str = env!("VOLHEALTH_GIT_REVISION");

/// What `--version` prints after the program name: the release and the git revision.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("VOLHEALTH_GIT_REVISION"),
    ")"
);

/// The component name set by the binary; `volhealth` until then.
static COMPONENT: OnceLock<String> = OnceLock::new();

/// Names the component this process runs (`apiserver`, `monitor`, `agent`...); the first call wins.
pub fn set_component(name: &str) {
    let _ = COMPONENT.set(name.to_string());
}

/// The component name reported in `volhealth_build_info`.
pub fn component() -> &'static str {
    COMPONENT.get().map(String::as_str).unwrap_or("volhealth")
}

/// The `volhealth_build_info` family: one gauge, always 1, labelled with the component, the
/// release and the git revision.
#[derive(Debug, Default)]
pub struct BuildInfoCollector;

impl Collector for BuildInfoCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauge = ConstGauge::new(1i64);
        let mut family = encoder.encode_descriptor(
            "volhealth_build_info",
            "Which volhealth build runs this component (always 1).",
            None,
            gauge.metric_type(),
        )?;
        let labels = [
            ("component", component()),
            ("version", env!("CARGO_PKG_VERSION")),
            ("revision", REVISION),
        ];
        gauge.encode(family.encode_family(&labels)?)
    }
}

/// The family in OpenMetrics text (without `# EOF`).
pub fn openmetrics() -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(BuildInfoCollector));
    crate::metrics_text::encode_as(&registry, Format::OpenMetrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_version_and_escapes_labels() {
        assert!(openmetrics().contains(&format!(
            "version=\"{}\",revision=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION"),
            REVISION
        )));
        assert!(!REVISION.is_empty());
        assert!(VERSION.starts_with(env!("CARGO_PKG_VERSION")));
    }
}
