//! The real kubectl against a test's server, with a kubeconfig and a cache of its own (never the
//! user's `KUBECONFIG`). Callers check [`available`] first.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Whether kubectl runs here; when not, the test is skipped (a failure instead under
/// `VOLHEALTH_REQUIRE_TOOLS=1`, see `have_tool`).
pub fn available() -> bool {
    crate::have_tool("kubectl", &["version", "--client"])
}

/// kubectl for one server.
pub struct Kubectl {
    /// The kubeconfig it uses.
    pub kubeconfig: PathBuf,
    /// Its `--cache-dir`.
    pub cache: PathBuf,
}

impl Kubectl {
    /// kubectl with `server`'s admin kubeconfig and its cache in `<dir>/kubectl-cache`.
    pub fn new(server: &crate::ApiServer, dir: &Path) -> Kubectl {
        Kubectl::with_kubeconfig(&server.kubeconfig, dir)
    }

    /// kubectl with `kubeconfig` (another identity's, say) and its cache in `<dir>/kubectl-cache`.
    pub fn with_kubeconfig(kubeconfig: &Path, dir: &Path) -> Kubectl {
        Kubectl {
            kubeconfig: kubeconfig.to_path_buf(),
            cache: dir.join("kubectl-cache"),
        }
    }

    /// A server on a fresh data directory, started with the `extra` flags, and kubectl for it;
    /// None when kubectl is not [`available`].
    pub fn start(extra: &[&str]) -> Option<(tempfile::TempDir, crate::ApiServer, Kubectl)> {
        if !available() {
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let server = crate::start_apiserver(dir.path(), extra);
        let kubectl = Kubectl::new(&server, dir.path());
        Some((dir, server, kubectl))
    }

    /// `kubectl ARGS...`, not started yet.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        c.env_remove("KUBECONFIG");
        c
    }

    /// Runs `kubectl ARGS...` to its end.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl")
    }

    /// Runs and requires success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs and requires failure; returns stdout and stderr together.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "kubectl {args:?} succeeded: {text}");
        text
    }
}
