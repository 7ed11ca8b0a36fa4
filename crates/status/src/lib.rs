//! `volhealth status` (also `kubectl volhealth`): one view of everything that is not healthy —
//! PVC conditions (controller side), pod volume conditions (node side) and CSINode storage
//! conditions (backend) — as a table for people or a documented JSON/YAML document for scripts.
//!
//! [`run`] takes plain [`StatusOptions`] and writes to any [`std::io::Write`], so the command
//! line parses flags into the options and tests call it in-process.
//!
//! # Layout
//! - [`kubeconfig`]: connecting as every volhealth component does, with timeouts and
//!   impersonation; explaining a failed call.
//! - [`scope`]: which PVCs and pods to read, and reading everything once.
//! - [`findings`]: the unhealthy conditions of a snapshot; [`coverage`]: what watches each volume.
//! - [`view`], [`render`]: one frame, drawn as a table, JSON or YAML.
//! - [`wait`]: `--wait-for`; `watch`: `--watch`; [`gate`]: whether the server stores the fields.

pub mod coverage;
mod error;
pub mod findings;
pub mod gate;
pub mod kubeconfig;
pub mod render;
pub mod scope;
pub mod view;
pub mod wait;
mod watch;

pub use error::{Error, Result};
pub use render::Format;
pub use wait::Expectation;

use scope::Scope;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use view::{Style, View, frame};

/// How often `--wait-for` looks again.
const WAIT_POLL: Duration = Duration::from_millis(250);

/// What `status` shows and how: the flags of `volhealth status`, parsed.
#[derive(Debug, Clone)]
pub struct StatusOptions {
    /// Kubeconfig file (default: KUBECONFIG, else in-cluster, else ~/.kube/config).
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    pub context: Option<String>,
    /// Namespace of the PVCs and pods to show (default: the context's namespace).
    pub namespace: Option<String>,
    /// Show PVCs and pods of every namespace (wins over `namespace`).
    pub all_namespaces: bool,
    /// Only PVCs and pods with these labels (a label selector).
    pub selector: Option<String>,
    /// Act as this user.
    pub as_user: Option<String>,
    /// Act as these groups too (with `as_user`).
    pub as_groups: Vec<String>,
    /// Output format.
    pub format: Format,
    /// Keep running and redraw whenever a PVC, pod or CSINode changes.
    pub watch: bool,
    /// Wait until the cluster shows all of these, then print.
    pub wait_for: Vec<Expectation>,
    /// How long `wait_for` waits.
    pub timeout: Duration,
    /// Give up on a connection or a request after this long.
    pub request_timeout: Duration,
    /// Colour the table.
    pub colour: bool,
    /// The output is a terminal: `watch` redraws a table in place.
    pub terminal: bool,
}

impl Default for StatusOptions {
    /// The defaults of `volhealth status`: the current context's namespace, a table, no colour.
    fn default() -> Self {
        StatusOptions {
            kubeconfig: None,
            context: None,
            namespace: None,
            all_namespaces: false,
            selector: None,
            as_user: None,
            as_groups: Vec::new(),
            format: Format::Table,
            watch: false,
            wait_for: Vec::new(),
            timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
            colour: false,
            terminal: false,
        }
    }
}

/// Runs `status` as `opts` say, writing what it shows to `out`. With `watch`, runs until the
/// process is stopped; [`run_until`] takes the future that ends it.
pub async fn run<W: Write>(opts: &StatusOptions, out: &mut W) -> Result<()> {
    run_until(opts, out, std::future::pending()).await
}

/// [`run`], with `watch` ending (successfully) when `shutdown` completes: the binary passes its
/// SIGINT or SIGTERM, since only the binary decides on signals.
pub async fn run_until<W: Write>(
    opts: &StatusOptions,
    out: &mut W,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let who = kubeconfig::Impersonation {
        user: opts.as_user.clone(),
        groups: opts.as_groups.clone(),
    };
    // A connection for single requests, or (`streaming`) one for watches.
    let connect = |streaming| {
        kubeconfig::connect_as(
            opts.kubeconfig.as_deref(),
            opts.context.as_deref(),
            opts.request_timeout,
            streaming,
            &who,
        )
    };
    let conn = connect(false).await?;
    let scope = Scope {
        namespace: if opts.all_namespaces {
            None
        } else {
            Some(
                opts.namespace
                    .clone()
                    .unwrap_or_else(|| conn.default_namespace.clone()),
            )
        },
        selector: opts.selector.clone(),
    };
    let style = Style {
        format: opts.format,
        colour: opts.colour,
    };
    let mut snapshot = scope::read(&conn, &scope).await?;
    let mut view = View::of(&snapshot);
    let deadline = tokio::time::Instant::now() + opts.timeout;
    loop {
        let unmet = wait::unmet(&opts.wait_for, &view.findings);
        if unmet.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let names: Vec<String> = unmet.iter().map(|e| e.to_string()).collect();
            let now = frame(&view, &scope, style, false)?;
            return Err(Error::WaitTimedOut {
                waited: opts.timeout,
                expected: names.join(", "),
                shows: now.trim_end().to_string(),
            });
        }
        tokio::time::sleep(WAIT_POLL).await;
        snapshot = scope::read(&conn, &scope).await?;
        view = View::of(&snapshot);
    }
    if opts.watch {
        let streaming = connect(true).await?;
        let in_place = opts.terminal && matches!(style.format, Format::Table | Format::Wide);
        return watch::run(streaming, scope, style, view, in_place, out, shutdown).await;
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
        (gate::Gate::Dropped { object }, Format::Json | Format::Yaml) => render::document(
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
    out.write_all(text.as_bytes()).map_err(Error::Write)?;
    out.flush().map_err(Error::Write)?;
    Ok(())
}

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
