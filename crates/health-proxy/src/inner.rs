//! What every request shares: the driver's channel, the settings, what is known of the driver
//! and the learned paths.

use crate::ProxyConfig;
use crate::paths::{Change, Paths};
use http::{Request, Response};
use std::sync::Mutex;
use tonic::body::Body;
use volhealth_csi::capabilities::Capabilities;
use volhealth_legacy_bridge::{LegacyController, LegacyModes, LegacyNode};

/// What the driver offers, and the bridges that stand in for what it lacks.
#[derive(Clone)]
pub(crate) struct Known {
    pub(crate) native: Capabilities,
    pub(crate) modes: LegacyModes,
    pub(crate) controller: Option<LegacyController>,
    pub(crate) node: Option<LegacyNode>,
}

impl Known {
    /// The driver's name, as GetPluginInfo gave it.
    pub(crate) fn driver(&self) -> Option<String> {
        Some(self.native.driver_name.clone()).filter(|n| !n.is_empty())
    }
}

pub(crate) struct Inner {
    pub(crate) channel: tonic::transport::Channel,
    pub(crate) config: ProxyConfig,
    pub(crate) known: tokio::sync::Mutex<Option<Known>>,
    /// The connection forwarded calls take.
    pub(crate) forwarder: crate::forward::Forwarder,
    pub(crate) paths: Mutex<Paths>,
}

impl Inner {
    /// Passes `req` to the driver and its answer back, unchanged.
    pub(crate) async fn forward(&self, req: Request<Body>) -> Response<Body> {
        match self.forwarder.forward(req).await {
            Ok(resp) => resp,
            Err(why) => crate::forward::unreachable(&self.config.csi_address, &why),
        }
    }

    pub(crate) fn remember(&self, change: Change) {
        let mut paths = self.paths.lock().unwrap_or_else(|p| p.into_inner());
        if !paths.apply(change) {
            return;
        }
        if let Some(dir) = &self.config.state_dir
            && let Err(e) = paths.store(dir)
        {
            tracing::warn!("keeping the learned paths in {}: {e}", dir.display());
        }
    }

    /// (publish path, staging path) learned for `volume`.
    pub(crate) fn paths_of(&self, volume: &str) -> (String, String) {
        self.paths
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .of(volume)
    }
}
