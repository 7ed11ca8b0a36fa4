//! The command lines of volhealth's two sidecars, the node agent and the controller-side monitor:
//! the code behind both the single-component binaries (`volhealth-agent`, `volhealth-monitor`)
//! and `volhealth agent` / `volhealth monitor`, so that each takes the same flags and behaves the
//! same.
//!
//! This crate is the sidecars' binary edge: it parses flags (with clap, as the Go sidecars' flag
//! package takes them) and reports errors with `anyhow`, as a `main` does.
//!
//! # Layout
//! - [`agent`], [`monitor`]: each sidecar's flags, their translation into the library's
//!   configuration, and its `run`.
//! - [`leader_flags`]: `--leader-election` and its timings, which the monitor and the
//!   remediation controller take.
//! - [`upstream_events`]: `--upstream-event-reasons`, which both take.
//! - [`go_flags`]: Go-style flags (`-v=5`, `--leader-election=true`) made into clap's.
//! - [`legacy_flags`]: the flags of drivers that speak only the legacy VOLUME_CONDITION shape.
//! - [`logging`], [`kube_json`]: klog-style log flags and the `tracing` set-up they drive.
//! - [`runtime`]: the async runtime, sized for the job, and the process-wide metrics path.
//! - [`single`]: the whole `main` of a single-component binary.

pub mod agent;
pub mod go_flags;
pub mod kube_json;
pub mod leader_flags;
pub mod legacy_flags;
pub mod logging;
pub mod monitor;
pub mod runtime;
pub mod single;
pub mod upstream_events;

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
