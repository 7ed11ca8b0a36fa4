//! The node agent: the node-side writer of `pod.status.volumeHealth` and `csinode.status.storageHealth`
//! (the kubelet's volume-health manager of KEP-1432, run out of tree).
//!
//! Every interval it finds the CSI volumes of the pods bound to its node whose stage or publish the kubelet has
//! attempted, calls NodeGetVolumeHealth and NodeGetStorageHealth on drivers that advertise them, and writes the
//! result through the `/status` subresources only when it differs from what is stored.

pub mod agent;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod discovery;
pub mod drivers;
pub mod error;
pub mod kubelet_dirs;
pub mod metrics;
pub mod pod_volumes;
mod run;
mod storage_cycle;
mod volume_cycle;
pub mod write_backoff;

pub use config::{AgentConfig, StaticDriver};
pub use error::{Error, Result};
pub use run::run;

#[cfg(test)]
mod agent_tests;
#[cfg(test)]
mod fakes;
