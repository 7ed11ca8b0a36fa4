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
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use tokio::sync::watch;
use tonic::transport::server::Router;
use tower::Layer as _;
use volhealth_csi::registration::registration_server::RegistrationServer;
use volhealth_csi::server::SocketOptions;
use volhealth_csi::v1::controller_server::ControllerServer;
use volhealth_csi::v1::identity_server::IdentityServer;
use volhealth_csi::v1::node_server::NodeServer;
use volhealth_daemon::in_progress_layer::{self, InProgressLayer};

/// The socket path of an endpoint: `unix:///abs`, `unix:/abs`, or a plain path.
pub fn socket_path(endpoint: &str) -> Result<PathBuf> {
    volhealth_csi::endpoint::parse(endpoint).map_err(|e| Error::Invalid(e.to_string()))
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Serves `router` on `endpoint` until `stop` is set; a failure sets `stop`, so that the
/// driver's other socket does not keep serving alone.
async fn serve_socket(
    what: &'static str,
    endpoint: &str,
    router: Router,
    stop: &watch::Sender<bool>,
) -> Result<()> {
    let options = SocketOptions {
        service: what,
        ..SocketOptions::default()
    };
    let result = volhealth_csi::server::serve_unix_with(
        endpoint,
        router,
        options,
        stopped(stop.subscribe()),
    )
    .await;
    if result.is_err() {
        stop.send_replace(true);
    }
    result.map_err(|e| Error::Serve {
        what,
        detail: e.to_string(),
    })
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
    // Each call is named by a shutdown the watchdog has to cut off while it is answered.
    let calls = InProgressLayer::new(in_progress_layer::csi_call);
    let registration = match &config.registration_dir {
        None => None,
        Some(dir) => {
            let path = registration::socket_path(dir, &config.driver_name);
            let endpoint = path.to_str().map(str::to_string).ok_or_else(|| {
                Error::Invalid(format!(
                    "the registration socket path {} is not UTF-8",
                    path.display()
                ))
            })?;
            let router = tonic::transport::Server::builder().add_service(calls.layer(
                RegistrationServer::new(RegistrationService::new(
                    config.driver_name.clone(),
                    socket.clone(),
                )),
            ));
            Some((endpoint, router))
        }
    };
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
        node_checker: NodeChecker::with_probe_interval(
            config.io_probe_timeout,
            config.io_probe_slow,
            config.io_probe_interval,
        ),
        injections: InjectionWatch::new(state.clone()),
        state,
        view: view.clone(),
        can_mount,
        ops: tokio::sync::Mutex::new(()),
        list_cycles: AtomicU64::new(0),
        config: config.clone(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let refresher = view.map(|v| {
        tokio::spawn(volume_view::run_refresher(
            v,
            config.refresh_interval,
            config.fsck_interval,
            stop_rx.clone(),
        ))
    });

    let router = tonic::transport::Server::builder()
        .add_service(calls.layer(IdentityServer::new(IdentityService::new(plugin.clone()))))
        .add_optional_service(config.mode.serves_controller().then(|| {
            calls.layer(crate::legacy::LegacyRoutes::new(
                ControllerServer::new(ControllerService::new(plugin.clone())),
                plugin.clone(),
            ))
        }))
        .add_optional_service(config.mode.serves_node().then(|| {
            calls.layer(crate::legacy::LegacyRoutes::new(
                NodeServer::new(NodeService::new(plugin.clone())),
                plugin.clone(),
            ))
        }));
    tracing::info!(
        endpoint = %socket.display(), driver = %config.driver_name, node = %config.node_id,
        mode = ?config.mode, state_dir = %config.state_dir.display(), "starting the driver"
    );
    let csi = serve_socket("CSI", &config.endpoint, router, &stop_tx);
    let reg = async {
        match registration {
            Some((endpoint, router)) => {
                serve_socket("plugin registration", &endpoint, router, &stop_tx).await
            }
            None => Ok(()),
        }
    };
    let servers = async {
        let (a, b) = tokio::join!(csi, reg);
        a.and(b)
    };
    tokio::pin!(servers);
    let result = tokio::select! {
        r = &mut servers => r,
        _ = shutdown => {
            stop_tx.send_replace(true);
            servers.await
        }
    };
    stop_tx.send_replace(true);
    if let Some(task) = refresher {
        let _ = task.await;
    }
    tracing::info!("driver stopped");
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_registration_socket_that_cannot_be_served_stops_the_csi_socket_too() {
        let dir = tempfile::tempdir().unwrap();
        let csi_socket = dir.path().join("csi.sock");
        let reg_dir = dir.path().join("plugins_registry");
        std::fs::create_dir_all(&reg_dir).unwrap();
        let mut config = DriverConfig::new(
            format!("unix://{}", csi_socket.display()),
            dir.path().join("state"),
            "node-a",
        );
        config.allow_mounts = false;
        config.registration_dir = Some(reg_dir.clone());
        let taken = registration::socket_path(&reg_dir, &config.driver_name);
        std::fs::write(&taken, b"not a socket").unwrap();
        // Without the shared stop, the CSI socket would keep serving until the (never) shutdown.
        let result = tokio::time::timeout(
            Duration::from_secs(60),
            run(config, std::future::pending::<()>()),
        )
        .await
        .expect("the driver stops by itself when a socket fails");
        let err = result.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Serve {
                    what: "plugin registration",
                    ..
                }
            ),
            "{err}"
        );
        assert!(!csi_socket.exists(), "the CSI socket was left behind");
        assert_eq!(std::fs::read(&taken).unwrap(), b"not a socket");
    }
}
