//! What `volhealth up` keeps in `--dir`, and the one lock that stops two `up`s from sharing it.
//!
//! ```text
//! <dir>/kubeconfig                    admin kubeconfig (client certificate; what people and `volhealth status` use)
//! <dir>/up.json                       what is running: API server URL, nodes, driver, process ids
//! <dir>/up.lock                       held while an `up` runs
//! <dir>/tokens.csv                    static tokens: admin, monitor (whose kubeconfig uses it), one system:node:<name> per node
//! <dir>/apiserver/                    the API server's SQLite database
//! <dir>/apiserver/pki/                its CA and serving certificate (client certificates are signed by the CA)
//! <dir>/driver/                       the reference driver's storage backend, shared by controller and nodes
//! <dir>/monitor/kubeconfig            the monitor's identity
//! <dir>/nodes/<node>/kubeconfig       the node's identity (client certificate, group system:nodes)
//! <dir>/nodes/<node>/kubelet/         the node's kubelet root (plugins_registry/, pods/, plugins/)
//! <dir>/logs/<component>.log          output of each process
//! <sockets>/controller.sock, <sockets>/<node>.sock   CSI endpoints (<dir>/run unless that path is too long)
//! ```

use crate::failure::Context as _;
use crate::failure::{Result, bail, ensure, invalid};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use volhealth_daemon::file_lock::{FileLock, Held, lock_exclusive};

/// Where `up` keeps its state unless `--dir` says otherwise, and where `inject` looks for it.
pub const DEFAULT_DIR: &str = ".volhealth";

/// Longest unix socket path we use; the kernel limit is 107 bytes plus the terminator.
const MAX_SOCKET_PATH: usize = 100;

/// Paths inside one `--dir`.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
    sockets: PathBuf,
}

/// A duration as a flag value: whole milliseconds, at least 1.
pub fn millis(d: std::time::Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

impl Layout {
    /// The layout of `dir` (made absolute; nothing is created).
    pub fn new(dir: &Path) -> Result<Layout> {
        let root = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir()
                .context("finding the current directory")?
                .join(dir)
        };
        let local = root.join("run");
        let longest = local.join("controller.sock").as_os_str().len() + 32;
        let sockets = if longest <= MAX_SOCKET_PATH {
            local
        } else {
            // Socket paths are limited to ~107 bytes; a deep --dir gets a short stand-in, stable per dir.
            use sha2::Digest;
            let digest = hex::encode(sha2::Sha256::digest(root.as_os_str().as_encoded_bytes()));
            std::env::temp_dir().join(format!("volhealth-{}", &digest[..12]))
        };
        Ok(Layout { root, sockets })
    }

    /// The arguments of `volhealth driver` serving the controller plugin of this layout (the
    /// driver runs with `--no-mounts`, so a killed run leaves no mounts behind); `extra` follows.
    pub fn controller_plugin_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "driver",
            "--mode",
            "controller",
            "--endpoint",
            &self.controller_endpoint(),
            "--state-dir",
            &self.driver_state().display().to_string(),
            "--node-id",
            "controller",
            "--no-mounts",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// The arguments of `volhealth driver` serving the node plugin of `node`; `extra` follows.
    pub fn node_plugin_args(&self, node: &str, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "driver",
            "--mode",
            "node",
            "--endpoint",
            &self.node_endpoint(node),
            "--state-dir",
            &self.driver_state().display().to_string(),
            "--node-id",
            node,
            "--registration-dir",
            &self.registration_dir(node).display().to_string(),
            "--no-mounts",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// The `--dir` itself.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// Admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }
    /// The run record.
    pub fn record(&self) -> PathBuf {
        self.root.join("up.json")
    }
    /// The lock file.
    pub fn lock(&self) -> PathBuf {
        self.root.join("up.lock")
    }
    /// Static token file.
    pub fn tokens(&self) -> PathBuf {
        self.root.join("tokens.csv")
    }
    /// API server data dir.
    pub fn apiserver_data(&self) -> PathBuf {
        self.root.join("apiserver")
    }
    /// The driver's state dir (storage backend), shared by the controller and every node plugin.
    pub fn driver_state(&self) -> PathBuf {
        self.root.join("driver")
    }
    /// The scheduler extender's kubeconfig.
    pub fn extender_kubeconfig(&self) -> PathBuf {
        self.root.join("scheduler-extender").join("kubeconfig")
    }
    /// The remediation controller's kubeconfig.
    pub fn remediate_kubeconfig(&self) -> PathBuf {
        self.root.join("remediate").join("kubeconfig")
    }
    /// The monitor's kubeconfig.
    pub fn monitor_kubeconfig(&self) -> PathBuf {
        self.root.join("monitor").join("kubeconfig")
    }
    /// A node's directory.
    pub fn node_dir(&self, node: &str) -> PathBuf {
        self.root.join("nodes").join(node)
    }
    /// A node's kubeconfig.
    pub fn node_kubeconfig(&self, node: &str) -> PathBuf {
        self.node_dir(node).join("kubeconfig")
    }
    /// A node's kubelet root dir.
    pub fn kubelet_root(&self, node: &str) -> PathBuf {
        self.node_dir(node).join("kubelet")
    }
    /// The command line of `node`'s agent (after the binary): its node name, kubeconfig and
    /// kubelet root dir here, its probe `interval`, and its metrics on `http_endpoint`.
    pub fn agent_args(
        &self,
        node: &str,
        interval: std::time::Duration,
        http_endpoint: String,
    ) -> Vec<String> {
        vec![
            "agent".into(),
            "--node-name".into(),
            node.to_string(),
            "--kubeconfig".into(),
            self.node_kubeconfig(node).display().to_string(),
            "--kubelet-root-dir".into(),
            self.kubelet_root(node).display().to_string(),
            "--interval".into(),
            millis(interval),
            "--http-endpoint".into(),
            http_endpoint,
        ]
    }
    /// A node's plugin registration dir.
    pub fn registration_dir(&self, node: &str) -> PathBuf {
        self.kubelet_root(node).join("plugins_registry")
    }
    /// Where the sockets live.
    pub fn sockets(&self) -> &Path {
        &self.sockets
    }
    /// The controller plugin's endpoint.
    pub fn controller_endpoint(&self) -> String {
        format!("unix://{}", self.sockets.join("controller.sock").display())
    }
    /// A node plugin's endpoint.
    pub fn node_endpoint(&self, node: &str) -> String {
        format!(
            "unix://{}",
            self.sockets.join(format!("{node}.sock")).display()
        )
    }
    /// Log file of one component.
    pub fn log(&self, component: &str) -> PathBuf {
        self.root.join("logs").join(format!("{component}.log"))
    }
}

/// The server URL in the kubeconfig the API server writes once it serves (`--write-kubeconfig`),
/// or `None` while it has not written one.
pub fn server_of(kubeconfig: &Path) -> Option<String> {
    let text = std::fs::read_to_string(kubeconfig).ok()?;
    text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("server:")
            .map(|s| s.trim().trim_matches('"').to_string())
    })
}

/// The name of simulated node `i` (1-based).
pub fn node_name(i: usize) -> String {
    format!("node-{i}")
}

/// What a running `up` writes to `<dir>/up.json`, for `inject --dir` and for the next `up`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// Layout version; an `up` refuses a dir written by an incompatible one.
    pub version: u32,
    /// The API server URL.
    pub server: String,
    /// The CSI driver name.
    pub driver: String,
    /// Simulated node names.
    pub nodes: Vec<String>,
    /// The outside driver's controller endpoint when `up` runs with `--driver-endpoint` (the
    /// reference driver, whose state `inject` changes, is then not running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_endpoint: Option<String>,
    /// Process ids of the running components (name → pid), so leftovers of an `up` that was
    /// killed without a chance to clean up can be stopped by the next one.
    #[serde(default)]
    pub pids: std::collections::BTreeMap<String, u32>,
}

/// Current [`RunRecord::version`].
pub const RECORD_VERSION: u32 = 1;

impl RunRecord {
    /// Reads `<dir>/up.json` (`None` when there is none).
    pub fn load(layout: &Layout) -> Result<Option<RunRecord>> {
        let path = layout.record();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let rec: RunRecord = serde_json::from_slice(&bytes).with_context(|| {
                    format!(
                        "{} is not a volhealth run record; is --dir pointing at something else?",
                        path.display()
                    )
                })?;
                ensure!(
                    rec.version == RECORD_VERSION,
                    "{} was written by a different volhealth version (layout {}, this one uses {}); use a fresh --dir",
                    path.display(),
                    rec.version,
                    RECORD_VERSION
                );
                Ok(Some(rec))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Writes `<dir>/up.json` atomically.
    pub fn store(&self, layout: &Layout) -> Result<()> {
        let path = layout.record();
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(self).context("encoding the run record")?;
        std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
    }
}

/// Holds `<dir>/up.lock` for the life of the value.
pub struct DirLock {
    _lock: FileLock,
}

/// Creates the dir (checking it is usable) and takes its lock; a second `up` on the same dir
/// gets a clear error instead of fighting the first over ports and sockets.
pub fn prepare(layout: &Layout) -> Result<DirLock> {
    let root = layout.root();
    if let Ok(meta) = std::fs::metadata(root) {
        ensure!(
            meta.is_dir(),
            "--dir {} exists and is not a directory",
            root.display()
        );
    }
    for dir in [
        root.to_path_buf(),
        root.join("logs"),
        layout.sockets().to_path_buf(),
    ] {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating {} (is --dir writable?)", dir.display()))?;
    }
    let path = layout.lock();
    let lock = lock_exclusive(&path, Held::Fail).map_err(|e| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            invalid!(
                "another `volhealth up` is already running with --dir {}; stop it first (Ctrl-C) or use another --dir",
                root.display()
            )
        } else {
            invalid!("locking {} (is --dir writable?): {e}", path.display())
        }
    })?;
    Ok(DirLock { _lock: lock })
}

/// The monitor's identity: the service account `deploy/kubernetes/monitor` ships.
pub const MONITOR_USER: &str = "system:serviceaccount:kube-system:csi-external-health-monitor";

/// The remediation controller's identity: the service account `deploy/kubernetes/remediate` ships.
pub const REMEDIATE_USER: &str = "system:serviceaccount:kube-system:volhealth-remediate";

/// The scheduler extender's identity: the service account `deploy/kubernetes/scheduler-extender` ships.
pub const EXTENDER_USER: &str = "system:serviceaccount:kube-system:volhealth-scheduler-extender";

/// A random bearer token.
pub fn new_token() -> String {
    use rand::Rng;
    let bytes: [u8; 24] = rand::rng().random();
    hex::encode(bytes)
}

/// The identities `up` uses, kept across runs so kubeconfigs stay valid.
#[derive(Debug, Clone)]
pub struct Tokens {
    /// Admin token (first line; the API server writes it into `<dir>/kubeconfig`, which `up` then
    /// replaces with the admin's client certificate).
    pub admin: String,
    /// The monitor's token.
    pub monitor: String,
    /// The remediation controller's token.
    pub remediate: String,
    /// The scheduler extender's token.
    pub extender: String,
    /// Node name → token.
    pub nodes: Vec<(String, String)>,
}

impl Tokens {
    /// Loads `<dir>/tokens.csv`, keeping existing tokens and adding any missing node.
    pub fn load_or_create(layout: &Layout, nodes: &[String]) -> Result<Tokens> {
        let path = layout.tokens();
        let existing = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let mut by_user = std::collections::BTreeMap::new();
        for line in existing.lines().filter(|l| !l.trim().is_empty()) {
            let mut fields = line.splitn(3, ',');
            let (Some(token), Some(user)) = (fields.next(), fields.next()) else {
                bail!(
                    "{} has a malformed line; delete the file to start over",
                    path.display()
                );
            };
            by_user.insert(user.to_string(), token.to_string());
        }
        let take = |user: &str| by_user.get(user).cloned().unwrap_or_else(new_token);
        let tokens = Tokens {
            admin: take("volhealth-admin"),
            monitor: take(MONITOR_USER),
            remediate: take(REMEDIATE_USER),
            extender: take(EXTENDER_USER),
            nodes: nodes
                .iter()
                .map(|n| (n.clone(), take(&volhealth_model::identity::node_user(n))))
                .collect(),
        };
        let mut text = format!(
            "{},volhealth-admin,volhealth-admin,\"system:masters\"\n{},{MONITOR_USER},csi-external-health-monitor,\"system:serviceaccounts,system:serviceaccounts:kube-system\"\n",
            tokens.admin, tokens.monitor
        );
        text.push_str(&format!(
            "{},{REMEDIATE_USER},volhealth-remediate,\"system:serviceaccounts,system:serviceaccounts:kube-system\"\n",
            tokens.remediate
        ));
        text.push_str(&format!(
            "{},{EXTENDER_USER},volhealth-scheduler-extender,\"system:serviceaccounts,system:serviceaccounts:kube-system\"\n",
            tokens.extender
        ));
        for (node, token) in &tokens.nodes {
            text.push_str(&format!(
                "{token},{},{node},\"{}\"\n",
                volhealth_model::identity::node_user(node),
                volhealth_model::identity::NODES_GROUP
            ));
        }
        write_private(&path, &text)?;
        Ok(tokens)
    }
}

/// Writes a file only the owner can read (tokens and kubeconfigs carry credentials).
pub fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_survive_a_second_run_and_new_nodes_get_their_own() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path()).unwrap();
        let first = Tokens::load_or_create(&layout, &["node-1".into()]).unwrap();
        let second = Tokens::load_or_create(&layout, &["node-1".into(), "node-2".into()]).unwrap();
        assert_eq!(first.admin, second.admin);
        assert_eq!(first.nodes[0], second.nodes[0]);
        assert_ne!(second.nodes[1].1, second.nodes[0].1);
        let text = std::fs::read_to_string(layout.tokens()).unwrap();
        assert!(
            text.starts_with(&format!("{},volhealth-admin,", first.admin)),
            "admin first: its token goes into the kubeconfig"
        );
        assert!(text.contains(",system:node:node-2,node-2,\"system:nodes\""));
    }

    #[test]
    fn a_second_lock_on_the_same_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path()).unwrap();
        let _held = prepare(&layout).unwrap();
        let err = prepare(&layout).err().unwrap().to_string();
        assert!(err.contains("already running"), "{err}");
    }

    #[test]
    fn a_file_as_dir_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = prepare(&Layout::new(&file).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("not a directory"), "{err}");
    }

    #[test]
    fn deep_dirs_get_short_socket_paths() {
        let deep = PathBuf::from("/").join("d".repeat(120));
        let layout = Layout::new(&deep).unwrap();
        assert!(layout.controller_endpoint().len() < 108);
        assert_eq!(layout.sockets(), Layout::new(&deep).unwrap().sockets());
    }
}
