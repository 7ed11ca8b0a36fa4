//! `volhealth health-proxy`: a CSI endpoint in front of any driver, so that consumers volhealth
//! does not control (the kubelet, the upstream health-monitor sidecar, any gRPC client) get the
//! v1.13 health RPCs from drivers that speak only the legacy VOLUME_CONDITION shape.
//!
//! - Every call it does not answer goes to the driver unchanged: the request and answer bytes,
//!   the metadata and trailers, methods it does not know included (the driver sees
//!   `:authority: localhost`).
//! - The capability answers gain the health capabilities the bridge can serve.
//! - The four health RPCs come from the driver when it has them, from the bridge otherwise; the
//!   node ones from the node fault detector (when given) for a driver with neither.
//! - NodeStageVolume and NodePublishVolume teach it each volume's paths (kept in the state dir),
//!   so NodeGetVolumeHealth works with only a volume id.

mod answer;
mod forward;
mod inner;
pub mod paths;
mod proxy;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use proxy::Proxy;

/// What the proxy needs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The driver's endpoint (`unix:///…`).
    pub csi_address: String,
    /// The proxy's own endpoint (`unix:///…`).
    pub listen: String,
    /// Where the learned paths are kept; `None` keeps them in memory only.
    pub state_dir: Option<PathBuf>,
    /// Deadline of the proxy's own calls to the driver (capabilities, legacy calls).
    pub timeout: Duration,
    /// Answer the health RPCs from the legacy VOLUME_CONDITION shape when the driver lacks them.
    pub legacy: bool,
    /// The legacy mapping rules.
    pub rules: Arc<volhealth_legacy_bridge::Rules>,
    /// Consecutive NOT_FOUND answers that make `VolumeNotFound`.
    pub debounce: u32,
    /// The node fault detector, which answers NodeGetVolumeHealth and NodeGetStorageHealth for
    /// a driver that has neither the RPC nor (for volumes) the legacy condition; `None` = off.
    pub node_faults: Option<Arc<volhealth_node_faults::Detector>>,
}

/// Why the proxy stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Serving the socket or reaching the driver failed.
    #[error(transparent)]
    Csi(#[from] volhealth_csi::Error),
    /// The state dir cannot be read.
    #[error("reading the learned paths in {path}: {source}")]
    State {
        /// The state dir.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// Connects to the driver (waiting for it) and serves until `shutdown` completes.
pub async fn run(
    config: ProxyConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let paths = match &config.state_dir {
        Some(dir) => paths::Paths::load(dir).map_err(|source| Error::State {
            path: dir.clone(),
            source,
        })?,
        None => paths::Paths::default(),
    };
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let channel = loop {
        tokio::select! {
            r = volhealth_csi::client::connect(&config.csi_address, config.timeout) => match r {
                Ok(c) => break c,
                Err(e) => tracing::warn!("waiting for the driver: {e}"),
            },
            _ = shutdown.clone() => return Ok(()),
        }
    };
    tracing::info!(driver = %config.csi_address, listen = %config.listen, "health proxy serving");
    let listen = config.listen.clone();
    let proxy = Proxy::new(channel, config, paths)?;
    let routes = tonic::service::Routes::from(axum::Router::new().fallback_service(proxy));
    let router = tonic::transport::Server::builder().add_routes(routes);
    volhealth_csi::server::serve_unix(&listen, router, shutdown).await?;
    Ok(())
}

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
