//! `volhealth status` (also `kubectl volhealth`): the flags, parsed into the options of
//! `volhealth_status`, which does the work. The plugin's program name and its shell completion
//! for kubectl live here too, as they are about this binary's command line.

pub mod complete;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use volhealth_status::{Expectation, Format, StatusOptions};

/// The file name under which `kubectl` finds this binary as the plugin `kubectl volhealth`.
pub const KUBECTL_PLUGIN_NAME: &str = "kubectl-volhealth";

/// Output format (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Aligned columns: namespace, object, source, status, reason, age, message.
    Table,
    /// The table plus node, volume, claim, driver and storage modes; messages are not shortened.
    Wide,
    /// The documented JSON document.
    Json,
    /// The same document as YAML.
    Yaml,
}

impl From<OutputFormat> for Format {
    fn from(format: OutputFormat) -> Format {
        match format {
            OutputFormat::Table => Format::Table,
            OutputFormat::Wide => Format::Wide,
            OutputFormat::Json => Format::Json,
            OutputFormat::Yaml => Format::Yaml,
        }
    }
}

/// When to colour the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Colour {
    /// When stdout is a terminal and `NO_COLOR` is unset.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Flags of `volhealth status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kubeconfig file (default: KUBECONFIG, else in-cluster, else ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Namespace of the PVCs and pods to show (default: the context's namespace).
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Show PVCs and pods of every namespace.
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Only PVCs and pods with these labels (a label selector, as kubectl's -l: app=web,tier!=db).
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Act as this user (the kubeconfig's identity must be allowed to impersonate it).
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
    /// Act as this group too (repeat for several; needs --as).
    #[arg(long = "as-group", value_name = "GROUP", requires = "as_user")]
    pub as_group: Vec<String>,
    /// Output format: table, wide, json or yaml.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: OutputFormat,
    /// Keep running and redraw whenever a PVC, pod or CSINode changes.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Wait until the cluster shows this, then print: KIND/NAME=REASON (e.g.
    /// pvc/data-1=VolumeNotFound), KIND/NAME=healthy, or healthy (nothing in scope). Repeat to
    /// wait for all of them. Exits 1 if --timeout passes first.
    #[arg(long, value_name = "EXPECT", value_parser = Expectation::parse, conflicts_with = "watch")]
    pub wait_for: Vec<Expectation>,
    /// How long --wait-for waits.
    #[arg(long, default_value = "60s", value_parser = volhealth_daemon::duration::parse, requires = "wait_for")]
    pub timeout: Duration,
    /// Give up on a connection or a request after this long (e.g. 10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = volhealth_daemon::duration::parse)]
    pub request_timeout: Duration,
    /// Colour the table: auto, always or never.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: Colour,
}

/// The arguments of `kubectl volhealth` when the program was started as `kubectl-volhealth`
/// (a kubectl plugin), else `None`. The plugin is `status`: `kubectl volhealth -A` and
/// `kubectl volhealth status -A` mean the same, and the program name is the one the user typed,
/// so `--help` shows `kubectl volhealth [OPTIONS]`.
pub fn plugin_argv(args: impl IntoIterator<Item = OsString>) -> Option<Vec<OsString>> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let called_as_plugin = args
        .first()
        .and_then(|a0| std::path::Path::new(a0).file_name())
        .is_some_and(|name| name == KUBECTL_PLUGIN_NAME);
    if !called_as_plugin {
        return None;
    }
    args[0] = OsString::from(PLUGIN_COMMAND);
    if args.get(1).is_some_and(|a| a == "status") {
        args.remove(1);
    }
    Some(args)
}

/// How the user types the plugin.
pub const PLUGIN_COMMAND: &str = "kubectl volhealth";

/// `kubectl volhealth`: the flags of `volhealth status`, under the name kubectl users type.
#[derive(Debug, clap::Parser)]
#[command(name = PLUGIN_COMMAND, bin_name = PLUGIN_COMMAND, version = volhealth_daemon::build_info::VERSION, about = "Show every volume and storage health condition in the cluster.", long_about = None)]
pub struct PluginCli {
    /// The flags of `volhealth status`.
    #[command(flatten)]
    pub args: Args,
}

fn use_colour(choice: Colour) -> bool {
    match choice {
        Colour::Always => true,
        Colour::Never => false,
        Colour::Auto => {
            std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    }
}

impl Args {
    /// The library's options for these flags, for output on this process's stdout.
    pub fn options(&self) -> StatusOptions {
        StatusOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            namespace: self.namespace.clone(),
            all_namespaces: self.all_namespaces,
            selector: self.selector.clone(),
            as_user: self.as_user.clone(),
            as_groups: self.as_group.clone(),
            format: self.output.into(),
            watch: self.watch,
            wait_for: self.wait_for.clone(),
            timeout: self.timeout,
            request_timeout: self.request_timeout,
            colour: use_colour(self.color),
            terminal: std::io::stdout().is_terminal(),
        }
    }
}

/// Runs `volhealth status`; `--watch` stops at SIGINT or SIGTERM (the shared signal, watched only
/// for `--watch`, so Ctrl-C ends a one-off or `--wait-for` run as usual).
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = args.options();
    let mut out = std::io::stdout();
    if options.watch {
        let stop = volhealth_daemon::shutdown_signal::sigint_or_sigterm();
        volhealth_status::run_until(&options, &mut out, stop).await?;
    } else {
        volhealth_status::run(&options, &mut out).await?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_name_means_status() {
        let argv = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            plugin_argv(argv(&["/usr/local/bin/kubectl-volhealth", "-A"])),
            Some(argv(&["kubectl volhealth", "-A"]))
        );
        assert_eq!(
            plugin_argv(argv(&["kubectl-volhealth", "status", "-A"])),
            Some(argv(&["kubectl volhealth", "-A"])),
            "the form the help used to show works too"
        );
        assert_eq!(
            plugin_argv(argv(&["kubectl-volhealth"])),
            Some(argv(&["kubectl volhealth"]))
        );
        assert_eq!(plugin_argv(argv(&["/bin/volhealth", "up"])), None);
        assert_eq!(plugin_argv(argv(&["kubectl-volhealth-x", "up"])), None);
        assert_eq!(plugin_argv(Vec::new()), None);
    }

    #[test]
    fn the_plugin_parses_what_its_help_shows() {
        use clap::{CommandFactory as _, Parser as _};
        let help = PluginCli::command().render_usage().to_string();
        assert!(
            help.contains("Usage: kubectl volhealth [OPTIONS]"),
            "{help}"
        );
        for argv in [
            &["kubectl-volhealth", "-A"][..],
            &["kubectl-volhealth", "status", "-A"],
            &["kubectl-volhealth", "-n", "kube-system", "-o", "wide"],
        ] {
            let args = plugin_argv(argv.iter().map(OsString::from)).unwrap();
            assert!(PluginCli::try_parse_from(args).is_ok(), "{argv:?}");
        }
    }
}
