//! `volhealth status` (also `kubectl volhealth`): one view of everything that is not healthy —
//! PVC conditions (controller side), pod volume conditions (node side) and CSINode storage
//! conditions (backend) — as a table for people or a documented JSON/YAML document for scripts.

pub mod complete;
pub mod coverage;
pub mod findings;
pub mod gate;
pub mod kubeconfig;
pub mod render;
pub mod wait;
mod watch;

use anyhow::Context as _;
use findings::Snapshot;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use kube::api::{Api, ListParams};
use render::Format;
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The file name under which `kubectl` finds this binary as the plugin `kubectl volhealth`.
pub const KUBECTL_PLUGIN_NAME: &str = "kubectl-volhealth";

/// How often `--wait-for` looks again.
const WAIT_POLL: Duration = Duration::from_millis(250);

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
    pub output: Format,
    /// Keep running and redraw whenever a PVC, pod or CSINode changes.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Wait until the cluster shows this, then print: KIND/NAME=REASON (e.g.
    /// pvc/data-1=VolumeNotFound), KIND/NAME=healthy, or healthy (nothing in scope). Repeat to
    /// wait for all of them. Exits 1 if --timeout passes first.
    #[arg(long, value_name = "EXPECT", value_parser = wait::parse_arg, conflicts_with = "watch")]
    pub wait_for: Vec<wait::Expectation>,
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

/// Which PVCs and pods to read.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// `None` = every namespace.
    pub namespace: Option<String>,
    /// Label selector for PVCs and pods (`-l`).
    pub selector: Option<String>,
}

/// Objects asked for per list request: a cluster's tens of thousands of pods come in pages, as
/// kubectl reads them, not in one response the server must build whole.
pub(crate) const LIST_PAGE: u32 = 500;

/// Every object of `api` matching `lp`, read [`LIST_PAGE`] at a time.
async fn list_all<K>(api: &Api<K>, lp: &ListParams) -> kube::Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut items = Vec::new();
    let mut lp = lp.clone().limit(LIST_PAGE);
    loop {
        let page = api.list(&lp).await?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(items),
        }
    }
}

impl Scope {
    fn api<K>(&self, client: &kube::Client) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
}

/// Reads everything `status` shows, once.
pub(crate) async fn read(conn: &kubeconfig::Connection, scope: &Scope) -> anyhow::Result<Snapshot> {
    let lp = ListParams::default();
    let selected = match &scope.selector {
        Some(sel) => lp.clone().labels(sel),
        None => lp.clone(),
    };
    let where_ = scope
        .namespace
        .as_deref()
        .map(|n| format!(" in namespace {n}"))
        .unwrap_or_default();
    let (pvc_api, pod_api) = (
        scope.api::<PersistentVolumeClaim>(&conn.client),
        scope.api::<Pod>(&conn.client),
    );
    let csinode_api = Api::<CSINode>::all(conn.client.clone());
    let pv_api = Api::<PersistentVolume>::all(conn.client.clone());
    let csidriver_api = Api::<CSIDriver>::all(conn.client.clone());
    let (pvcs, pods, csinodes, pvs, csidrivers) = (
        list_all(&pvc_api, &selected),
        list_all(&pod_api, &selected),
        list_all(&csinode_api, &lp),
        list_all(&pv_api, &lp),
        list_all(&csidriver_api, &lp),
    );
    let (pvcs, pods, csinodes, pvs, csidrivers) =
        futures::join!(pvcs, pods, csinodes, pvs, csidrivers);
    let pvcs = pvcs.map_err(|e| {
        kubeconfig::explain(&e, &format!("listing PersistentVolumeClaims{where_}"), conn)
    })?;
    let pods = pods.map_err(|e| kubeconfig::explain(&e, &format!("listing Pods{where_}"), conn))?;
    let csinodes = csinodes.map_err(|e| kubeconfig::explain(&e, "listing CSINodes", conn))?;
    // PVs only name the driver of a volume; an identity that may not list them still gets the rest.
    let pvs = pvs.unwrap_or_default();
    // CSIDrivers only say what watches the controller side; without them it shows as unknown.
    let csidrivers = csidrivers.unwrap_or_default();
    Ok(Snapshot {
        pvcs,
        pods,
        csinodes,
        pvs,
        csidrivers,
    })
}

/// How one frame is drawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    /// Output format.
    pub format: Format,
    /// Colour the table.
    pub colour: bool,
}

/// What one frame shows: the conditions, and what watches each volume.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct View {
    /// Every unhealthy condition.
    pub findings: Vec<findings::Finding>,
    /// Every bound claim in scope and what watches it.
    pub volumes: Vec<coverage::VolumeCoverage>,
}

impl View {
    /// The view of one snapshot.
    pub fn of(snapshot: &Snapshot) -> View {
        let findings = findings::collect(snapshot);
        let volumes = coverage::collect(snapshot, &findings);
        View { findings, volumes }
    }
}

/// Renders one frame of output for `view` (`stream`: one JSON document per line).
pub(crate) fn frame(
    view: &View,
    scope: &Scope,
    style: Style,
    stream: bool,
) -> anyhow::Result<String> {
    let now = jiff::Timestamp::now();
    let wide = style.format == Format::Wide;
    let conditions = match style.format {
        Format::Json | Format::Yaml => {
            return render::document(
                &view.findings,
                &view.volumes,
                scope.namespace.as_deref(),
                now,
                style.format,
                stream,
            );
        }
        Format::Table | Format::Wide if view.findings.is_empty() => {
            render::all_healthy(scope.namespace.as_deref())
        }
        Format::Table | Format::Wide => render::table(&view.findings, now, wide, style.colour),
    };
    Ok(conditions + &render::coverage_table(&view.volumes, wide, style.colour))
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

/// Runs `volhealth status`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let who = kubeconfig::Impersonation {
        user: args.as_user.clone(),
        groups: args.as_group.clone(),
    };
    let conn = kubeconfig::connect_as(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        args.request_timeout,
        false,
        &who,
    )
    .await?;
    let scope = Scope {
        namespace: if args.all_namespaces {
            None
        } else {
            Some(
                args.namespace
                    .clone()
                    .unwrap_or_else(|| conn.default_namespace.clone()),
            )
        },
        selector: args.selector.clone(),
    };
    let style = Style {
        format: args.output,
        colour: use_colour(args.color),
    };
    let mut snapshot = read(&conn, &scope).await?;
    let mut view = View::of(&snapshot);
    let deadline = tokio::time::Instant::now() + args.timeout;
    loop {
        let unmet = wait::unmet(&args.wait_for, &view.findings);
        if unmet.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let names: Vec<String> = unmet.iter().map(|e| e.to_string()).collect();
            let now = frame(&view, &scope, style, false)?;
            anyhow::bail!(
                "waited {:?} and the cluster does not show {} yet; it shows:\n{}",
                args.timeout,
                names.join(", "),
                now.trim_end()
            );
        }
        tokio::time::sleep(WAIT_POLL).await;
        snapshot = read(&conn, &scope).await?;
        view = View::of(&snapshot);
    }
    if args.watch {
        let streaming = kubeconfig::connect_as(
            args.kubeconfig.as_deref(),
            args.context.as_deref(),
            args.request_timeout,
            true,
            &who,
        )
        .await?;
        watch::run(streaming, scope, style, view).await?;
        return Ok(ExitCode::SUCCESS);
    }
    // Nothing to show: make sure that is not because the server drops the fields.
    let gate = if view.findings.is_empty() {
        gate::check(&conn, &snapshot).await
    } else {
        gate::Gate::Stored
    };
    let text = match (&gate, style.format) {
        (gate::Gate::Dropped { object }, Format::Table | Format::Wide) => {
            gate::dropped_message(object)
        }
        (gate::Gate::Dropped { object }, Format::Json | Format::Yaml) => render::document_with(
            &view.findings,
            &view.volumes,
            scope.namespace.as_deref(),
            jiff::Timestamp::now(),
            style.format,
            false,
            &[gate::dropped_message(object)
                .replace('\n', " ")
                .trim()
                .to_string()],
        )?,
        (gate::Gate::Unknown(why), Format::Table | Format::Wide) => format!(
            "{}(Could not check that the API server stores the health fields: a dry-run write was refused: {why}.)\n",
            frame(&view, &scope, style, false)?
        ),
        _ => frame(&view, &scope, style, false)?,
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .context("writing to stdout")?;
    out.flush().context("writing to stdout")?;
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
