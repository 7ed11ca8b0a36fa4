//! `up` after a `kill -9` of `up`: the components the killed run left behind are stopped, all
//! of them, and `up` says which before it starts the cluster again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;

/// Whether process `pid` exists and is not a zombie; the state as /proc says it, for messages.
fn running(pid: u32) -> (bool, String) {
    // Reaped by nobody (their parent died), they may linger as zombies: that is not running.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .next();
    (!stat.is_empty() && state != Some("Z"), stat)
}

#[test]
fn leftovers_of_a_killed_up_are_stopped_and_named() {
    let mut c = Cluster::start(2);
    let old = c.recorded_pids();
    assert!(old.len() >= 5, "{old:?}");
    // Returns once up is gone (reaped): what it would take down with it, it has by then.
    c.kill_up();
    for p in &old {
        let (alive, stat) = running(*p);
        assert!(
            alive,
            "the components should outlive a kill -9 of up: {p}: {stat}"
        );
    }
    c.launch(2);
    let log = std::fs::read_to_string(c.up_log()).unwrap();
    let expected = format!("stopping its {} leftover component(s)", old.len());
    assert!(log.contains(&expected), "{log}");
    assert!(log.contains("cluster-controllers (pid"), "{log}");
    for p in &old {
        let (alive, stat) = running(*p);
        assert!(!alive, "leftover pid {p} is still running: {stat}");
    }
}
