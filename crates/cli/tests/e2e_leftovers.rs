//! `up` after a `kill -9` of `up`: the components the killed run left behind are stopped, all
//! of them, and `up` says which before it starts the cluster again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::time::Duration;

#[test]
fn leftovers_of_a_killed_up_are_stopped_and_named() {
    let mut c = Cluster::start(2);
    let old = c.recorded_pids();
    assert!(old.len() >= 5, "{old:?}");
    kill(Pid::from_raw(c.pid().unwrap() as i32), Signal::SIGKILL).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        old.iter()
            .all(|p| std::path::Path::new(&format!("/proc/{p}")).exists()),
        "the components should outlive a kill -9 of up"
    );
    c.launch(2);
    let log = std::fs::read_to_string(c.up_log()).unwrap();
    let expected = format!("stopping its {} leftover component(s)", old.len());
    assert!(log.contains(&expected), "{log}");
    assert!(log.contains("cluster-controllers (pid"), "{log}");
    for p in &old {
        // Reaped by nobody (their parent died), they may linger as zombies: not running is enough.
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next();
        assert!(
            stat.is_empty() || state == Some("Z"),
            "leftover pid {p} is still running: {stat}"
        );
    }
}
