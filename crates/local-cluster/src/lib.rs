//! The whole volhealth system on one machine, as a library the `volhealth` binary drives.
//!
//! # Layout
//! - [`up`]: `volhealth up`: starts the API server, the reference driver (or uses yours), the
//!   cluster controllers, the monitor, one agent per node and a sample workload, from an
//!   [`up::UpConfig`]; its state directory ([`up::layout`]) lets a second run resume the first.
//! - [`cluster_controllers`]: the provisioner, PV controller, scheduler and kubelet volume role
//!   `up` runs as a child process ([`cluster_controllers::ControllersConfig`]).
//! - [`inject`]: conditions and faults injected into the reference driver of a running `up`
//!   (or any driver's state dir), from an [`inject::InjectRequest`].
//! - [`bench`]: a cluster of a given size, measured ([`bench::BenchConfig`]).
//! - [`Failure`]: what a step inside them met, with what it was doing; the entry points' [`Error`]
//!   carries it.
//!
//! Each component runs as a child process of the calling binary (`current_exe`), with the same
//! flags a user would give it; the binary must therefore offer the subcommands `apiserver`,
//! `driver`, `monitor`, `agent`, `cluster-controllers`, `scheduler-extender` and `remediate`.

pub mod bench;
pub mod cluster_controllers;
mod connection;
mod failure;
pub mod inject;
pub mod up;

pub use failure::Failure;

/// Why `up`, `bench`, `inject` or the cluster controllers failed. Each variant carries the
/// chain of what was being done (the message is that chain's outermost line; its sources follow).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `up` could not start the cluster, or a component of it stopped.
    #[error(transparent)]
    Up(Failure),
    /// The bench could not build or measure its cluster.
    #[error(transparent)]
    Bench(Failure),
    /// The injection could not be resolved or written.
    #[error(transparent)]
    Inject(Failure),
    /// The cluster controllers could not start.
    #[error(transparent)]
    ClusterControllers(Failure),
}

/// The result of this crate's entry points.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
