//! The `--inject-cmd` contract: how the suite asks a driver to report a condition.
//!
//! The command is run by `sh -c` with these arguments appended:
//!
//! - `set SCOPE TARGET STATUS REASON`: from now on, report `STATUS` with `REASON`;
//! - `clear SCOPE TARGET`: stop reporting what `set` asked for.
//!
//! SCOPE is `controller` (ControllerGetVolumeHealth / ControllerListVolumeHealth), `node`
//! (NodeGetVolumeHealth) or `storage` (NodeGetStorageHealth). TARGET is a volume id, or the node
//! id (NodeGetInfo) for `storage`. STATUS is the API spelling: Inaccessible, DataLoss, Degraded,
//! StorageUnreachable or StorageDegraded. Exit status 0 means done; anything else fails the case,
//! with the command's stderr in the message.

use std::time::Duration;

use tokio::process::Command;

/// Runs the driver's injection command.
#[derive(Debug, Clone)]
pub struct Injector {
    command: String,
    timeout: Duration,
}

/// Why an injection command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// It could not be started.
    #[error("starting `{command}`: {source}")]
    Start {
        /// The command line.
        command: String,
        /// The cause.
        source: std::io::Error,
    },
    /// It ran too long.
    #[error("`{command}` did not finish within {seconds} s")]
    Timeout {
        /// The command line.
        command: String,
        /// The limit.
        seconds: u64,
    },
    /// It exited with failure.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The end of its stderr.
        stderr: String,
    },
}

impl Injector {
    /// An injector running `command` (a shell command line), each run bounded by `timeout`.
    pub fn new(command: impl Into<String>, timeout: Duration) -> Injector {
        Injector {
            command: command.into(),
            timeout,
        }
    }

    /// `CMD set SCOPE TARGET STATUS REASON`.
    pub async fn set(
        &self,
        scope: &str,
        target: &str,
        status: &str,
        reason: &str,
    ) -> Result<(), InjectError> {
        self.run(&["set", scope, target, status, reason]).await
    }

    /// `CMD clear SCOPE TARGET`.
    pub async fn clear(&self, scope: &str, target: &str) -> Result<(), InjectError> {
        self.run(&["clear", scope, target]).await
    }

    async fn run(&self, args: &[&str]) -> Result<(), InjectError> {
        let shown = format!("{} {}", self.command, args.join(" "));
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("{} \"$@\"", self.command))
            .arg("volhealth-inject")
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = match tokio::time::timeout(self.timeout, cmd.output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(source)) => {
                return Err(InjectError::Start {
                    command: shown,
                    source,
                });
            }
            Err(_) => {
                return Err(InjectError::Timeout {
                    command: shown,
                    seconds: self.timeout.as_secs(),
                });
            }
        };
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: String = stderr
            .trim()
            .chars()
            .rev()
            .take(400)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Err(InjectError::Failed {
            command: shown,
            status: out.status,
            stderr: tail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn arguments_are_appended_to_the_command_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("log");
        let inj = Injector::new(
            format!("printf '%s|' >> '{}'", log.display()),
            Duration::from_secs(10),
        );
        inj.set("controller", "vol 1", "Inaccessible", "Gone")
            .await
            .expect("set");
        inj.clear("storage", "node-a").await.expect("clear");
        let got = std::fs::read_to_string(&log).expect("log");
        assert_eq!(
            got,
            "set|controller|vol 1|Inaccessible|Gone|clear|storage|node-a|"
        );
    }

    #[tokio::test]
    async fn a_failing_command_reports_its_stderr() {
        let inj = Injector::new("echo nope >&2; exit 3; true", Duration::from_secs(10));
        let err = inj.clear("node", "v").await.expect_err("fails").to_string();
        assert!(
            err.contains("nope") && err.contains("clear node v"),
            "{err}"
        );
    }
}
