//! The node side: NodeGetVolumeStats with its legacy condition, answered as NodeGetVolumeHealth
//! would be. Called only for volumes staged or published at the paths given, as the legacy spec
//! requires.

use crate::{Bridge, controller::call, no_condition, wire};
use volhealth_csi::v1;
use volhealth_csi::v1::VolumeHealth;

/// A legacy driver's Node service, asked through the bridge.
#[derive(Debug, Clone)]
pub struct LegacyNode {
    channel: tonic::transport::Channel,
    bridge: Bridge,
}

impl LegacyNode {
    /// Asks the driver on `channel`.
    pub fn new(channel: tonic::transport::Channel, bridge: Bridge) -> Self {
        LegacyNode { channel, bridge }
    }

    /// NodeGetVolumeStats for the volume and paths of `req`, as NodeGetVolumeHealth's answer.
    /// The publish path is the stats' `volume_path`, or the staging path for a volume that is
    /// only staged. A request with neither path is refused without calling the driver.
    pub async fn volume_health(
        &self,
        req: v1::NodeGetVolumeHealthRequest,
    ) -> Result<VolumeHealth, tonic::Status> {
        let volume_path = if req.volume_publish_path.is_empty() {
            req.staging_target_path.clone()
        } else {
            req.volume_publish_path.clone()
        };
        if req.volume_id.is_empty() || volume_path.is_empty() {
            return Err(tonic::Status::invalid_argument(
                "NodeGetVolumeStats needs the volume id and a path where it is staged or published",
            ));
        }
        let volume_id = req.volume_id.clone();
        let stats = v1::NodeGetVolumeStatsRequest {
            volume_id: req.volume_id,
            volume_path,
            staging_target_path: req.staging_target_path,
        };
        let resp: wire::NodeGetVolumeStatsResponse =
            match call(&self.channel, wire::NODE_GET_VOLUME_STATS_PATH, stats).await {
                Ok(r) => r,
                Err(s) if s.code() == tonic::Code::NotFound => {
                    return match self.bridge.not_found(&volume_id, "NodeGetVolumeStats", &s) {
                        Some(entry) => Ok(VolumeHealth {
                            volume_id,
                            health_statuses: vec![entry],
                        }),
                        None => Err(s),
                    };
                }
                Err(s) => return Err(s),
            };
        self.bridge.answered(&volume_id);
        match self.bridge.entries(resp.volume_condition.as_ref()) {
            Some(health_statuses) => Ok(VolumeHealth {
                volume_id,
                health_statuses,
            }),
            None => Err(no_condition("NodeGetVolumeStats", &volume_id)),
        }
    }
}
