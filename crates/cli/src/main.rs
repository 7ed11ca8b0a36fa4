//! `volhealth`: one multi-call binary for every volhealth component.
//!
//! Each subcommand lives in its own module under `cmd/`; the libraries in `crates/*` hold the
//! logic, this binary only parses flags, sets up logging and maps errors to exit codes.

mod cmd;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Kubernetes volume health monitoring (KEP-1432), out of tree.
#[derive(Debug, Parser)]
#[command(name = "volhealth", version = volhealth_daemon::build_info::VERSION, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the embedded Kubernetes API server (v1.37 subset, persisted in SQLite).
    Apiserver(cmd::apiserver::Args),
    /// Run the reference CSI driver (hostpath-style, real health detection).
    Driver(cmd::driver::Args),
    /// Serve a CSI endpoint in front of a driver that adds the health RPCs from its legacy
    /// VOLUME_CONDITION answers and forwards every other call unchanged.
    HealthProxy(cmd::health_proxy::Args),
    /// Inject or clear health conditions and RPC faults in a running reference driver.
    Inject(cmd::inject::Args),
    /// Run the controller-side monitor that writes pvc.status.healthStatus.
    // A flag given twice takes the last value, as Go's flag package does.
    #[command(args_override_self = true)]
    Monitor(Box<cmd::monitor::Args>),
    /// Run the node-side agent that writes pod.status.volumeHealth and csinode.status.storageHealth.
    // A flag given twice takes the last value, as Go's flag package does.
    #[command(args_override_self = true)]
    Agent(cmd::agent::Args),
    /// Run the kube-scheduler extender that keeps pods off nodes whose storage health their driver's policy rejects.
    // A flag given twice takes the last value, as Go's flag package does.
    #[command(args_override_self = true)]
    SchedulerExtender(cmd::scheduler_extender::Args),
    /// Run the remediation controller: act on health conditions as a policy file says (dry-run by default).
    // A flag given twice takes the last value, as Go's flag package does.
    #[command(args_override_self = true)]
    Remediate(cmd::remediate::Args),
    /// Start the whole system on this machine: API server, driver, monitor, agents, sample workload.
    Up(cmd::up::Args),
    /// Measure the whole system at scale: writes, detection lags, a correlated failure, memory.
    Bench(cmd::bench::Args),
    /// Show every volume and storage health condition in the cluster.
    Status(cmd::status::Args),
    /// Print a shell completion script (bash, zsh, fish...) to stdout.
    Completions(cmd::completions::Args),
    /// Write man pages for volhealth and every subcommand into a directory.
    Man(cmd::man::Args),
    /// Make this binary the kubectl plugin `kubectl volhealth` (a symlink in a directory on PATH).
    KubectlPlugin(cmd::kubectl_plugin::Args),
    /// Check any CSI driver's health RPCs against CSI v1.13.0 and KEP-1432.
    Conformance(cmd::conformance::Args),
    /// Run the minimal provisioner, PV controller, scheduler and kubelet volume role `up` uses.
    #[command(hide = true)]
    ClusterControllers(cmd::cluster_controllers::Args),
}

impl Command {
    /// The component name reported in `volhealth_build_info`, for those that serve metrics.
    fn component(&self) -> Option<&'static str> {
        match self {
            Command::Apiserver(_) => Some("apiserver"),
            Command::Driver(_) => Some("driver"),
            Command::HealthProxy(_) => Some("health-proxy"),
            Command::Monitor(_) => Some("monitor"),
            Command::Agent(_) => Some("agent"),
            Command::SchedulerExtender(_) => Some("scheduler-extender"),
            Command::Remediate(_) => Some("remediate"),
            _ => None,
        }
    }
}

/// The subcommands that stand in for Go sidecars and controllers: they take flags as Go's flag
/// package does (`-v=5`, `-csi-address=…`), as the manifests written for those pass them.
const GO_FLAG_COMMANDS: [&str; 4] = ["monitor", "agent", "remediate", "scheduler-extender"];

/// `argv`, with Go-style flags normalised when the subcommand is one of [`GO_FLAG_COMMANDS`].
fn sidecar_argv(argv: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let sidecar = argv
        .get(1)
        .is_some_and(|c| GO_FLAG_COMMANDS.iter().any(|g| c == g));
    if sidecar {
        cmd::go_flags::normalize(argv, 2)
    } else {
        argv
    }
}

fn main() -> ExitCode {
    // Installed as `kubectl_complete-volhealth`, it completes `kubectl volhealth` for kubectl.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv
        .first()
        .is_some_and(|a0| cmd::status::complete::called_for_completion(a0))
    {
        let words: Vec<String> = argv[1..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        print!("{}", cmd::status::complete::complete(&words));
        return ExitCode::SUCCESS;
    }
    // Installed as `kubectl-volhealth`, the binary is the kubectl plugin for `status`.
    let cli = match cmd::status::plugin_argv(std::env::args_os()) {
        Some(argv) => Cli {
            command: Command::Status(cmd::status::PluginCli::parse_from(argv).args),
        },
        None => Cli::parse_from(sidecar_argv(std::env::args_os().collect())),
    };
    // `status` speaks for itself on stderr; client-library logs would only repeat its errors.
    let default_log = cmd::logging::LogArgs::default();
    let log = match &cli.command {
        Command::Status(_)
        | Command::Completions(_)
        | Command::Man(_)
        | Command::KubectlPlugin(_) => None,
        Command::Apiserver(a) => Some(&a.log),
        Command::Driver(a) => Some(&a.log),
        Command::HealthProxy(a) => Some(&a.log),
        Command::Monitor(a) => Some(&a.log),
        Command::Agent(a) => Some(&a.log),
        Command::SchedulerExtender(a) => Some(&a.log),
        Command::Remediate(a) => Some(&a.log),
        Command::ClusterControllers(a) => Some(&a.log),
        Command::Inject(_) | Command::Up(_) | Command::Conformance(_) | Command::Bench(_) => {
            Some(&default_log)
        }
    };
    match (&cli.command, log) {
        // `up` talks to its user in progress lines; its own log goes beside its components'.
        (Command::Up(a), Some(log)) => {
            cmd::logging::init_to_file(log, &a.dir.join("logs").join("up.log"));
        }
        (_, Some(log)) => cmd::init_logging(log),
        (_, None) => {}
    }
    if let Some(component) = cli.command.component() {
        volhealth_daemon::build_info::set_component(component);
    }
    // As Go programs do: the soft open-files limit is the shell's default, the hard one the
    // operator's choice. The API server sizes its connection cap from it.
    volhealth_daemon::fd_limit::raise_to_hard();
    let result = match cli.command {
        Command::Apiserver(a) => cmd::block_on(cmd::apiserver::run(a)),
        Command::Driver(a) => cmd::block_on(cmd::driver::run(a)),
        Command::HealthProxy(a) => cmd::block_on(cmd::health_proxy::run(a)),
        Command::Inject(a) => cmd::block_on(cmd::inject::run(a)),
        Command::Monitor(a) => cmd::block_on_with(cmd::MONITOR_THREADS, cmd::monitor::run(*a)),
        Command::Agent(a) => cmd::block_on_with(cmd::Threads::One, cmd::agent::run(a)),
        Command::SchedulerExtender(a) => cmd::block_on(cmd::scheduler_extender::run(a)),
        Command::Remediate(a) => cmd::block_on(cmd::remediate::run(a)),
        Command::Up(a) => cmd::block_on(cmd::up::run(a)),
        Command::Bench(a) => cmd::block_on(cmd::bench::run(a)),
        Command::Status(a) => cmd::block_on(cmd::status::run(a)),
        Command::Completions(a) => cmd::completions::run(a, Cli::command()),
        Command::Man(a) => cmd::man::run(a, Cli::command()),
        Command::KubectlPlugin(a) => cmd::kubectl_plugin::run(a),
        Command::Conformance(a) => cmd::block_on(cmd::conformance::run(a)),
        Command::ClusterControllers(a) => cmd::block_on(cmd::cluster_controllers::run(a)),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("volhealth: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
