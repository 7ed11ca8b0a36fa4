//! The controller side: ListVolumes and ControllerGetVolume with their legacy condition, answered
//! as ControllerListVolumeHealth and ControllerGetVolumeHealth would be.

use crate::{Bridge, LegacyModes, wire};
use tonic::codegen::http::uri::PathAndQuery;
use volhealth_csi::v1;
use volhealth_csi::v1::VolumeHealth;

/// A legacy driver's Controller service, asked through the bridge.
#[derive(Debug, Clone)]
pub struct LegacyController {
    channel: tonic::transport::Channel,
    bridge: Bridge,
    modes: LegacyModes,
}

impl LegacyController {
    /// Asks the driver on `channel`, which advertises `modes`.
    pub fn new(channel: tonic::transport::Channel, bridge: Bridge, modes: LegacyModes) -> Self {
        LegacyController {
            channel,
            bridge,
            modes,
        }
    }

    /// One page of ListVolumes as ControllerListVolumeHealth entries. Entries that carry a
    /// condition are mapped; entries that carry none although the capability is advertised (as
    /// some drivers send) are asked about one by one with ControllerGetVolume when the driver
    /// has it, and otherwise left out (no report). Entries without a volume id are left out.
    pub async fn list_page(
        &self,
        max_entries: i32,
        starting_token: String,
    ) -> Result<(Vec<VolumeHealth>, String), tonic::Status> {
        let req = v1::ListVolumesRequest {
            max_entries,
            starting_token,
        };
        let resp: wire::ListVolumesResponse = self.unary(wire::LIST_VOLUMES, req).await?;
        let mut out = Vec::with_capacity(resp.entries.len());
        for entry in resp.entries {
            let Some(id) = entry
                .volume
                .map(|v| v.volume_id)
                .filter(|id| !id.is_empty())
            else {
                continue;
            };
            let condition = entry.status.and_then(|s| s.volume_condition);
            match self.bridge.entries(condition.as_ref()) {
                Some(health_statuses) => out.push(VolumeHealth {
                    volume_id: id,
                    health_statuses,
                }),
                None if self.modes.get_volume => {
                    if let Ok(health) = self.get(id).await {
                        out.push(health);
                    }
                }
                None => {}
            }
        }
        Ok((out, resp.next_token))
    }

    /// ControllerGetVolume about `volume_id` as ControllerGetVolumeHealth's answer, keyed by the
    /// id asked about whatever the answer names.
    pub async fn get(&self, volume_id: String) -> Result<VolumeHealth, tonic::Status> {
        let req = v1::ControllerGetVolumeRequest {
            volume_id: volume_id.clone(),
        };
        let result = self
            .unary::<_, wire::ControllerGetVolumeResponse>(wire::CONTROLLER_GET_VOLUME_PATH, req)
            .await
            .map(|r| r.status.and_then(|s| s.volume_condition));
        self.bridge.answer(volume_id, "ControllerGetVolume", result)
    }

    async fn unary<Req, Resp>(&self, path: &'static str, req: Req) -> Result<Resp, tonic::Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        call(&self.channel, path, req).await
    }
}

/// One unary call on `path` whose answer is decoded as `Resp`.
pub(crate) async fn call<Req, Resp>(
    channel: &tonic::transport::Channel,
    path: &'static str,
    req: Req,
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("the driver is not ready: {e}")))?;
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    grpc.unary(
        tonic::Request::new(req),
        PathAndQuery::from_static(path),
        codec,
    )
    .await
    .map(tonic::Response::into_inner)
}
