//! The node side: NodeGetVolumeStats with its legacy condition, answered as NodeGetVolumeHealth
//! would be. Called only for volumes staged or published at the paths given, as the legacy spec
//! requires.

use crate::{Bridge, controller::call, wire};
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
        let result = call::<_, wire::NodeGetVolumeStatsResponse>(
            &self.channel,
            wire::NODE_GET_VOLUME_STATS_PATH,
            stats,
        )
        .await
        .map(|r| r.volume_condition);
        self.bridge.answer(volume_id, "NodeGetVolumeStats", result)
    }
}
