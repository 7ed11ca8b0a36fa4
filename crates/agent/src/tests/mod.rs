//! The agent's unit tests, over fakes at its trait boundaries (the cluster, the node's pods and
//! directories, the drivers, the clock).

mod agent_world;
mod fakes;
mod interval;
mod storage;
mod volume;
mod write_queue;
