//! `volhealth_build_info{component,version,revision} 1` and `--version`: which build of which
//! component is running.

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

/// Label values may hold `\`, `"` and newlines; the exposition formats escape them alike.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The family in OpenMetrics text (without `# EOF`).
pub fn openmetrics() -> String {
    format!(
        "# HELP volhealth_build_info Which volhealth build runs this component (always 1).\n\
         # TYPE volhealth_build_info gauge\n\
         volhealth_build_info{{component=\"{}\",version=\"{}\",revision=\"{}\"}} 1\n",
        escape(component()),
        escape(env!("CARGO_PKG_VERSION")),
        escape(REVISION),
    )
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
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
