//! Log flags as the Kubernetes sidecars take them (`--v=N`, `--logging-format`, klog's legacy
//! flags), and the `tracing` set-up they drive.
//!
//! Verbosity: klog's `--v` levels map onto `tracing` levels for volhealth's own crates, while
//! libraries stay at `info` (`warn` for the chattiest):
//!
//! | `--v` | volhealth | libraries |
//! |---|---|---|
//! | 0–1 (default 0) | info | info |
//! | 2–3 | debug | info |
//! | 4 | trace | info |
//! | 5 and more | trace | debug |
//!
//! `RUST_LOG`, when set, wins over `--v` (standard `tracing` filter syntax, e.g.
//! `RUST_LOG=info,volhealth_agent=trace,kube=debug`). Colour is used only when stderr is a
//! terminal, so log files and pipes get plain text.

use std::io::IsTerminal;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, in the Kubernetes components' shape (`ts`, `v`, `msg`, flat
    /// key/values).
    Json,
}

/// The log flags every long-running component accepts.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LogArgs {
    /// Log verbosity as klog counts it: 0-1 info, 2-3 debug, 4 and more trace (RUST_LOG, when
    /// set, takes precedence).
    #[arg(long = "v", value_name = "N", default_value_t = 0)]
    pub verbosity: u8,
    /// Log line format: text, or json as the Kubernetes components write it (--log-format is
    /// the same flag).
    #[arg(long = "logging-format", alias = "log-format", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// klog's flags, which older sidecar manifests still pass.
    #[command(flatten)]
    pub klog: KlogFlags,
}

/// Declares klog's command-line flags: each is accepted, in klog's own spelling, and has no
/// effect here (logs always go to stderr, the format is --logging-format's).
macro_rules! klog_flags {
    (bools: [$(($b:ident, $bname:literal)),* $(,)?], values: [$(($v:ident, $vname:literal)),* $(,)?]) => {
        /// klog's flags (`--logtostderr`, `--log_dir`, `--vmodule`, ...): accepted so that a
        /// manifest written for a Go sidecar starts, and named in one warning.
        #[derive(Debug, Clone, Default, clap::Args)]
        pub struct KlogFlags {
            $(
                #[doc = concat!("klog's --", $bname, " (no effect).")]
                #[arg(long = $bname, hide = true, num_args = 0..=1, require_equals = true,
                      default_missing_value = "true", value_parser = crate::go_flags::parse_bool)]
                pub $b: Option<bool>,
            )*
            $(
                #[doc = concat!("klog's --", $vname, " (no effect).")]
                #[arg(long = $vname, hide = true, value_name = "VALUE")]
                pub $v: Option<String>,
            )*
        }

        impl KlogFlags {
            /// The flags that were given, as `--name`.
            pub fn given(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if self.$b.is_some() { out.push(concat!("--", $bname)); })*
                $(if self.$v.is_some() { out.push(concat!("--", $vname)); })*
                out
            }
        }
    };
}

klog_flags! {
    bools: [
        (logtostderr, "logtostderr"),
        (alsologtostderr, "alsologtostderr"),
        (add_dir_header, "add_dir_header"),
        (one_output, "one_output"),
        (skip_headers, "skip_headers"),
        (skip_log_headers, "skip_log_headers"),
        (log_json_split_stream, "log-json-split-stream"),
        (log_text_split_stream, "log-text-split-stream"),
    ],
    values: [
        (log_dir, "log_dir"),
        (log_file, "log_file"),
        (log_file_max_size, "log_file_max_size"),
        (log_backtrace_at, "log_backtrace_at"),
        (stderrthreshold, "stderrthreshold"),
        (vmodule, "vmodule"),
        (log_flush_frequency, "log-flush-frequency"),
        (log_json_info_buffer_size, "log-json-info-buffer-size"),
        (log_text_info_buffer_size, "log-text-info-buffer-size"),
    ]
}

/// Says once, after logging is set up, which flags of the Go sidecars were given that have no
/// effect here.
pub fn warn_ignored(flags: &[&str]) {
    if !flags.is_empty() {
        tracing::warn!(
            flags = %flags.join(", "),
            "ignoring flags of the upstream sidecar that have no effect here"
        );
    }
}

/// The `tracing` filter for a klog verbosity.
pub fn filter_for_verbosity(v: u8) -> &'static str {
    match v {
        0 | 1 => "info",
        2 | 3 => "info,volhealth=debug",
        4 => "info,volhealth=trace",
        _ => "debug,volhealth=trace",
    }
}

/// Sets up `tracing` on stderr from the flags and `RUST_LOG`, and has every Kubernetes client
/// request marked in progress whatever the filter (see `volhealth_daemon::kube_requests`).
pub fn init(args: &LogArgs) {
    init_with(
        args,
        tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stderr),
        std::io::stderr().is_terminal(),
    );
}

/// Like [`init`], with the log lines appended to `path` instead (a command whose own output is
/// progress lines on the terminal: its libraries' log lines would break them up). Falls back
/// to stderr when the file cannot be opened.
pub fn init_to_file(args: &LogArgs, path: &std::path::Path) {
    let file = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        });
    match file {
        Ok(file) => init_with(
            args,
            tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::sync::Mutex::new(file)),
            false,
        ),
        Err(_) => init(args),
    }
}

fn init_with(args: &LogArgs, writer: tracing_subscriber::fmt::writer::BoxMakeWriter, ansi: bool) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => tracing_subscriber::EnvFilter::new(spec),
        _ => tracing_subscriber::EnvFilter::new(filter_for_verbosity(args.verbosity)),
    };
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    let lines = match args.log_format {
        LogFormat::Text => lines.with_filter(filter).boxed(),
        LogFormat::Json => lines
            .event_format(crate::kube_json::KubeJson)
            .with_filter(filter)
            .boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(lines)
        .with(volhealth_daemon::kube_requests::layer())
        .try_init();
    warn_ignored(&args.klog.given());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_onto_levels() {
        assert_eq!(filter_for_verbosity(0), "info");
        assert_eq!(filter_for_verbosity(1), "info");
        assert_eq!(filter_for_verbosity(2), "info,volhealth=debug");
        assert_eq!(filter_for_verbosity(3), "info,volhealth=debug");
        assert_eq!(filter_for_verbosity(4), "info,volhealth=trace");
        assert_eq!(filter_for_verbosity(5), "debug,volhealth=trace");
        assert_eq!(filter_for_verbosity(10), "debug,volhealth=trace");
    }

    #[test]
    fn every_filter_parses() {
        for v in 0..=10 {
            assert!(tracing_subscriber::EnvFilter::try_new(filter_for_verbosity(v)).is_ok());
        }
    }
}
