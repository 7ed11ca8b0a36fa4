//! A server in a child process (this test binary again, running one ignored test that serves),
//! for tests that need what only a process of its own has: a low open-files limit (set with
//! util-linux `prlimit`, as the workspace forbids the unsafe `pre_exec`), or a resident size to
//! read from `/proc`. The child serves until its stdin closes; the parent ends it by dropping
//! the [`Child`] handle.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Set in the child only: the directory to serve from.
pub const DIR_ENV: &str = "VOLHEALTH_TEST_CHILD_SERVER_DIR";
/// Set in the child only when it serves TLS.
pub const TLS_ENV: &str = "VOLHEALTH_TEST_CHILD_SERVER_TLS";
/// The line the child prints once it serves, followed by its URL.
const SERVING: &str = "CHILD SERVING ";

/// The serving child process.
pub struct Child {
    /// Base URL (`http://` or `https://`).
    pub url: String,
    /// The child's process id.
    pub pid: u32,
    process: std::process::Child,
}

/// Starts `test` (an ignored test of this binary calling [`serve_if_child`]) in a child under
/// `prlimit --nofile=LIMIT:LIMIT` when `nofile` is given, serving `dir`; waits until it serves.
pub fn start(test: &str, dir: &Path, tls: bool, nofile: Option<u64>) -> Child {
    let exe = std::env::current_exe().expect("the test binary");
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}")).arg("--").arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.args([
        test,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(DIR_ENV, dir)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    if tls {
        cmd.env(TLS_ENV, "1");
    } else {
        cmd.env_remove(TLS_ENV);
    }
    let mut process = cmd.spawn().expect("starting the child server");
    let stdout = process.stdout.take().expect("the child's stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest may have printed the test's name on the same line.
            if let Some((_, url)) = line.split_once(SERVING) {
                let _ = tx.send(url.trim().to_string());
            }
        }
    });
    let url = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(url) => url,
        Err(e) => {
            let _ = process.kill();
            let _ = process.wait();
            panic!("the child server did not start: {e}");
        }
    };
    Child {
        url,
        pid: process.id(),
        process,
    }
}

impl Child {
    /// Kills the child with SIGKILL (as `kill -9` does: nothing of it runs any more) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// In the child (when [`DIR_ENV`] is set): serves until stdin closes, and returns true.
/// Elsewhere returns false at once.
pub fn serve_if_child() -> bool {
    let Some(dir) = std::env::var_os(DIR_ENV) else {
        return false;
    };
    let dir = std::path::PathBuf::from(dir);
    let server = if std::env::var_os(TLS_ENV).is_some() {
        super::start_tls_apiserver(&dir, &[])
    } else {
        super::start_apiserver(&dir, &[])
    };
    println!("{SERVING}{}", server.url);
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(server); // stops it, and waits until it has let go of its data
    true
}

/// The resident set of process `pid`, in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

impl Drop for Child {
    fn drop(&mut self) {
        // Closing stdin asks it to stop; it is killed if it has not within the deadline.
        drop(self.process.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            match self.process.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if std::time::Instant::now() > deadline => break,
                Ok(None) => std::thread::park_timeout(Duration::from_millis(50)),
            }
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
