//! Starting a driver process: state dir, background refresher, gRPC services on unix sockets.

use crate::config::DriverConfig;
use crate::controller::ControllerService;
use crate::detect_controller::SpaceThresholds;
use crate::detect_node::NodeChecker;
use crate::identity::IdentityService;
use crate::injection_watch::InjectionWatch;
use crate::node::NodeService;
use crate::plugin::Plugin;
use crate::registration::{self, RegistrationService};
use crate::state::StateDir;
use crate::volume_view::{self, VolumeView};
use crate::{Error, Result};
use std::future::Future;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use tokio_stream::wrappers::UnixListenerStream;
use volhealth_csi::registration::registration_server::RegistrationServer;
use volhealth_csi::v1::controller_server::ControllerServer;
use volhealth_csi::v1::identity_server::IdentityServer;
use volhealth_csi::v1::node_server::NodeServer;

/// The socket path of an endpoint: `unix:///abs`, `unix:/abs`, or a plain path.
pub fn socket_path(endpoint: &str) -> Result<PathBuf> {
    volhealth_csi::endpoint::parse(endpoint).map_err(|e| Error::Invalid(e.to_string()))
}

/// Binds a unix socket, replacing a stale socket file left by an earlier run.
fn bind(path: &Path) -> Result<tokio::net::UnixListener> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::io("creating socket directory", parent, e))?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(Error::Invalid(format!(
                "{} exists and is not a socket",
                path.display()
            )));
        }
        std::fs::remove_file(path).map_err(|e| Error::io("removing stale socket", path, e))?;
    }
    let listener =
        tokio::net::UnixListener::bind(path).map_err(|e| Error::io("listening on", path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(|e| Error::io("setting permissions of", path, e))?;
    Ok(listener)
}

async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Serves the driver described by `config` until `shutdown` resolves.
pub async fn run(config: DriverConfig, shutdown: impl Future<Output = ()>) -> Result<()> {
    if config.node_id.is_empty() {
        return Err(Error::Invalid("a node id is required".into()));
    }
    if config.driver_name.is_empty() {
        return Err(Error::Invalid("a driver name is required".into()));
    }
    let state = StateDir::new(&config.state_dir);
    state.ensure(&config.node_id)?;
    let socket = socket_path(&config.endpoint)?;
    let limits = SpaceThresholds {
        low_fraction: config.low_space_fraction,
        full_bytes: config.full_space_bytes,
    };
    let view = if config.mode.serves_controller() {
        Some(Arc::new(VolumeView::load(state.clone(), limits)?))
    } else {
        None
    };
    let can_mount = config.mode.serves_node()
        && config.allow_mounts
        && crate::mounts::probe_privilege(&state.node_dir(&config.node_id));
    if config.mode.serves_node() && !can_mount {
        tracing::warn!(
            "mounts are not available (no privilege or disabled): staging and publishing make symlinks \
             to the volume data instead of bind and loop mounts; node checks compare the symlinks"
        );
    }
    let plugin = Arc::new(Plugin {
        node_checker: NodeChecker::new(config.io_probe_timeout, config.io_probe_slow),
        injections: InjectionWatch::new(state.clone()),
        state,
        view: view.clone(),
        can_mount,
        ops: tokio::sync::Mutex::new(()),
        list_cycles: AtomicU64::new(0),
        config: config.clone(),
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let refresher = view.map(|v| {
        tokio::spawn(volume_view::run_refresher(
            v,
            config.refresh_interval,
            config.fsck_interval,
            stop_rx.clone(),
        ))
    });

    let router = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(IdentityService::new(plugin.clone())))
        .add_optional_service(
            config
                .mode
                .serves_controller()
                .then(|| ControllerServer::new(ControllerService::new(plugin.clone()))),
        )
        .add_optional_service(
            config
                .mode
                .serves_node()
                .then(|| NodeServer::new(NodeService::new(plugin.clone()))),
        );
    let listener = bind(&socket)?;
    tracing::info!(
        endpoint = %socket.display(), driver = %config.driver_name, node = %config.node_id,
        mode = ?config.mode, state_dir = %config.state_dir.display(), "serving CSI"
    );
    let csi = router
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), stopped(stop_rx.clone()));
    let reg_socket = config
        .registration_dir
        .as_ref()
        .map(|d| registration::socket_path(d, &config.driver_name));
    let reg_cleanup = reg_socket.clone();
    let reg = async {
        let Some(path) = &reg_socket else {
            return Ok(());
        };
        let listener = bind(path).map_err(|e| Error::Serve {
            what: "registration",
            detail: e.to_string(),
        })?;
        tracing::info!(socket = %path.display(), "serving plugin registration");
        tonic::transport::Server::builder()
            .add_service(RegistrationServer::new(RegistrationService::new(
                config.driver_name.clone(),
                socket.clone(),
            )))
            .serve_with_incoming_shutdown(
                UnixListenerStream::new(listener),
                stopped(stop_rx.clone()),
            )
            .await
            .map_err(|e| Error::Serve {
                what: "registration",
                detail: e.to_string(),
            })
    };
    let servers = async {
        let (a, b) = tokio::join!(
            async {
                csi.await.map_err(|e| Error::Serve {
                    what: "CSI",
                    detail: e.to_string(),
                })
            },
            reg
        );
        a.and(b)
    };
    tokio::pin!(servers);
    let result = tokio::select! {
        r = &mut servers => r,
        _ = shutdown => {
            let _ = stop_tx.send(true);
            servers.await
        }
    };
    let _ = stop_tx.send(true);
    if let Some(task) = refresher {
        let _ = task.await;
    }
    let _ = std::fs::remove_file(&socket);
    if let Some(path) = reg_cleanup {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!("driver stopped");
    result
}
