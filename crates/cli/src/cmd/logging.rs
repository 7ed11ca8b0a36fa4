//! Log flags as the Kubernetes sidecars take them (`--v=N`, `--log-format`), and the `tracing`
//! set-up they drive.
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
    /// One JSON object per line.
    Json,
}

/// The log flags every long-running component accepts.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LogArgs {
    /// Log verbosity as klog counts it: 0-1 info, 2-3 debug, 4 and more trace (RUST_LOG, when
    /// set, takes precedence).
    #[arg(long = "v", value_name = "N", default_value_t = 0)]
    pub verbosity: u8,
    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
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
#[allow(dead_code)] // the single-component binaries, which include this file, log to stderr only
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
        LogFormat::Json => lines.json().with_filter(filter).boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(lines)
        .with(volhealth_daemon::kube_requests::layer())
        .try_init();
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
