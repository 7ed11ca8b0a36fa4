//! Finding the node's CSI drivers: the `--csi-driver` flags, or the kubelet's plugin registration sockets.
//!
//! Registration follows what the kubelet does with node-driver-registrar's socket: GetInfo gives the driver name
//! and endpoint, and NotifyRegistrationStatus tells the registrar whether the driver was accepted. The directory
//! is rescanned every few seconds, so drivers that come, go or restart (a new socket) are picked up.

use crate::config::{Legacy, StaticDriver};
use crate::drivers::{self, DriverSet};
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use volhealth_csi::registration;

const CSI_PLUGIN_TYPE: &str = volhealth_csi::registration::CSI_PLUGIN;
const REGISTRAR_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Connects to each `--csi-driver` until it answers, then keeps it in `set`.
pub async fn run_static(
    drivers_flags: Vec<StaticDriver>,
    set: DriverSet,
    timeout: Duration,
    retry: Duration,
    legacy: Legacy,
) {
    let tasks = drivers_flags.into_iter().map(|flag| {
        let set = set.clone();
        let legacy = legacy.clone();
        async move {
            let mut logged = false;
            loop {
                match drivers::connect(&flag.endpoint, None, timeout, &legacy).await {
                    Ok(driver) => {
                        if driver.name != flag.name {
                            tracing::warn!(
                                "--csi-driver {} points at a driver that calls itself {:?}; using the flag's name",
                                flag.name,
                                driver.name
                            );
                        }
                        let driver = drivers::Driver { name: flag.name.clone(), ..driver };
                        tracing::info!(
                            driver = %driver.name, endpoint = %driver.endpoint, volume_health = driver.volume_health,
                            storage_health = driver.storage_health, "driver connected"
                        );
                        set.insert(driver);
                        return;
                    }
                    Err(e) => {
                        if !logged {
                            tracing::warn!("driver {}: {e}; retrying every {retry:?}", flag.name);
                            logged = true;
                        }
                    }
                }
                tokio::time::sleep(retry).await;
            }
        }
    });
    futures::future::join_all(tasks).await;
}

/// Identity of a socket file: a restarted registrar creates a new one.
type SocketId = (u64, u64, i64, i64);

fn socket_id(meta: &std::fs::Metadata) -> SocketId {
    (meta.dev(), meta.ino(), meta.mtime(), meta.mtime_nsec())
}

struct Registered {
    id: SocketId,
    driver_name: Option<String>,
}

/// Watches `dir` for registration sockets forever, keeping `set` in step with it.
pub async fn run_registration(
    dir: PathBuf,
    set: DriverSet,
    timeout: Duration,
    poll: Duration,
    legacy: Legacy,
) {
    let mut known: BTreeMap<PathBuf, Registered> = BTreeMap::new();
    let mut failed: BTreeMap<PathBuf, SocketId> = BTreeMap::new();
    loop {
        scan_once(&dir, &set, timeout, &legacy, &mut known, &mut failed).await;
        tokio::time::sleep(poll).await;
    }
}

async fn scan_once(
    dir: &Path,
    set: &DriverSet,
    timeout: Duration,
    legacy: &Legacy,
    known: &mut BTreeMap<PathBuf, Registered>,
    failed: &mut BTreeMap<PathBuf, SocketId>,
) {
    let mut present: BTreeMap<PathBuf, SocketId> = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if let Ok(meta) = std::fs::metadata(&path)
                && meta.file_type().is_socket()
            {
                present.insert(path, socket_id(&meta));
            }
        }
    }
    // Sockets that went away, or were replaced: their driver leaves (and may come back below).
    let gone: Vec<PathBuf> = known
        .iter()
        .filter(|(p, r)| present.get(*p) != Some(&r.id))
        .map(|(p, _)| p.clone())
        .collect();
    for path in gone {
        if let Some(reg) = known.remove(&path)
            && let Some(name) = reg.driver_name
        {
            tracing::info!(driver = %name, socket = %path.display(), "driver unregistered");
            set.remove(&name);
        }
    }
    failed.retain(|p, id| present.get(p) == Some(id));
    for (path, id) in present {
        if known.contains_key(&path) {
            continue;
        }
        let driver_name = match register(&path, timeout, legacy).await {
            Ok(driver) => {
                let name = driver.name.clone();
                tracing::info!(
                    driver = %name, endpoint = %driver.endpoint, volume_health = driver.volume_health,
                    storage_health = driver.storage_health, socket = %path.display(), "driver registered"
                );
                set.insert(driver);
                Some(name)
            }
            Err(RegisterError::NotCsi(kind)) => {
                tracing::debug!(socket = %path.display(), "ignoring a {kind:?} plugin");
                None
            }
            Err(RegisterError::Failed(e)) => {
                // Retried on the next scan; logged once per socket.
                if failed.insert(path.clone(), id).is_none() {
                    tracing::warn!(socket = %path.display(), "registration failed (retrying): {e}");
                }
                continue;
            }
        };
        failed.remove(&path);
        known.insert(path, Registered { id, driver_name });
    }
}

enum RegisterError {
    NotCsi(String),
    Failed(String),
}

async fn register(
    socket: &Path,
    timeout: Duration,
    legacy: &Legacy,
) -> Result<drivers::Driver, RegisterError> {
    let socket_s = socket.to_string_lossy().to_string();
    // A registrar that died leaves its socket behind; do not let it hold up the scan for a full timeout.
    let channel = volhealth_csi::client::connect(&socket_s, timeout.min(REGISTRAR_CONNECT_TIMEOUT))
        .await
        .map_err(|e| RegisterError::Failed(format!("connecting: {e}")))?;
    let mut client = registration::registration_client::RegistrationClient::new(channel);
    let info = tokio::time::timeout(
        timeout,
        client.get_info(registration::InfoRequest::default()),
    )
    .await
    .map_err(|_| RegisterError::Failed(format!("GetInfo timed out after {timeout:?}")))?
    .map_err(|s| RegisterError::Failed(format!("GetInfo: {}: {}", s.code(), s.message())))?
    .into_inner();
    if info.r#type != CSI_PLUGIN_TYPE {
        return Err(RegisterError::NotCsi(info.r#type));
    }
    // Registration is the kubelet's: the agent only reads GetInfo and never answers
    // NotifyRegistrationStatus. Beside a kubelet, an answer of "not registered" (say, the agent
    // cannot reach a socket the kubelet can) would make the upstream node-driver-registrar exit
    // and restart the driver's registrar container; the agent keeps such failures to itself.
    if info.name.is_empty() || info.endpoint.is_empty() {
        return Err(RegisterError::Failed(
            "the registrar gave no driver name or endpoint".to_string(),
        ));
    }
    drivers::connect(&info.endpoint, Some(&info.name), timeout, legacy)
        .await
        .map_err(|e| RegisterError::Failed(e.to_string()))
}
