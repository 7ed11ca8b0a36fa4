//! The node agent: the node-side writer of `pod.status.volumeHealth` and `csinode.status.storageHealth`
//! (the kubelet's volume-health manager of KEP-1432, run out of tree).
//!
//! Every interval it finds the CSI volumes of the pods bound to its node whose stage or publish the kubelet has
//! attempted, calls NodeGetVolumeHealth and NodeGetStorageHealth on drivers that advertise them, and writes the
//! result through the `/status` subresources only when it differs from what is stored.
//!
//! The machinery both writers share (timed probes, pacing, the severity-ordered write queue and
//! its concurrent loop, the write path with its overlay, outcomes and backoff, Events, metric
//! families, the clock) is `volhealth_writer`; this crate keeps what is the agent's own: finding
//! the node's pods and their attempted CSI volumes ([`pod_volumes`], [`kubelet_dirs`]), the
//! drivers registered on the node ([`discovery`], [`drivers`]), the two object kinds it writes
//! ([`targets`]; the writer's offer path decides what a report makes of them), and the wiring
//! ([`run`]).

mod agent;
mod cluster;
pub mod config;
mod discovery;
mod drivers;
mod error;
mod forbidden;
mod kubelet_dirs;
mod metrics;
mod node_faults;
mod pod_volumes;
mod run;
mod storage_cycle;
mod targets;
mod volume_cycle;
mod watched;

pub use config::{AgentConfig, NodeFaultMode, StaticDriver};
pub use error::{Error, Result};
pub use kubelet_dirs::KubeletRoot;
pub use run::run;

#[cfg(test)]
mod tests;

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
