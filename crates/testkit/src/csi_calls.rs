//! CSI calls the tests make again and again against a driver (or a proxy in front of one): the
//! RPC capability numbers it advertises, the (status, reason) pairs of its health answers and a
//! whole ControllerListVolumeHealth cycle.

use tonic::Status;
use tonic::transport::Channel;
use volhealth_csi::capabilities::{controller_rpcs, node_rpcs};
use volhealth_csi::v1;
use volhealth_csi::v1::controller_client::ControllerClient;
use volhealth_csi::v1::node_client::NodeClient;

/// The RPC capability numbers the Controller and the Node service on `channel` advertise; a
/// service's refusal (say, one the driver does not serve) in its place.
pub async fn rpc_capabilities(
    channel: Channel,
) -> (Result<Vec<i32>, Status>, Result<Vec<i32>, Status>) {
    let controller = ControllerClient::new(channel.clone())
        .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
        .await;
    let node = NodeClient::new(channel)
        .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
        .await;
    let controller =
        controller.map(|answer| controller_rpcs(&answer.get_ref().capabilities).collect());
    let node = node.map(|answer| node_rpcs(&answer.get_ref().capabilities).collect());
    (controller, node)
}

/// (status, reason) of health entries, sorted.
pub fn health_pairs(entries: &[v1::volume_health::VolumeHealthEntry]) -> Vec<(i32, String)> {
    let mut v: Vec<(i32, String)> = entries
        .iter()
        .map(|e| (e.status, e.reason.clone()))
        .collect();
    v.sort();
    v
}

/// The sorted (status, reason) pairs of a health answer's `volume_health`.
fn answer_pairs(health: Option<v1::VolumeHealth>) -> Result<Vec<(i32, String)>, Status> {
    let health = health.ok_or_else(|| Status::internal("an answer without volume_health"))?;
    Ok(health_pairs(&health.health_statuses))
}

/// The (status, reason) pairs of a ControllerGetVolumeHealth of `id`, or the call's refusal.
pub async fn controller_health(
    ctrl: &mut ControllerClient<Channel>,
    id: &str,
) -> Result<Vec<(i32, String)>, Status> {
    let resp = ctrl
        .controller_get_volume_health(v1::ControllerGetVolumeHealthRequest {
            volume_id: id.into(),
            ..Default::default()
        })
        .await?;
    answer_pairs(resp.into_inner().volume_health)
}

/// The (status, reason) pairs of a NodeGetVolumeHealth of `id` published at `publish_path`
/// (empty: no path given), or the call's refusal.
pub async fn node_health(
    node: &mut NodeClient<Channel>,
    id: &str,
    publish_path: &str,
) -> Result<Vec<(i32, String)>, Status> {
    let req = v1::NodeGetVolumeHealthRequest {
        volume_id: id.into(),
        volume_publish_path: publish_path.into(),
        staging_target_path: String::new(),
    };
    answer_pairs(
        node.node_get_volume_health(req)
            .await?
            .into_inner()
            .volume_health,
    )
}

/// The entries of a NodeGetStorageHealth answer, or the call's refusal.
pub async fn storage_health(
    node: &mut NodeClient<Channel>,
) -> Result<Vec<v1::node_get_storage_health_response::StorageBackendHealth>, Status> {
    let resp = node
        .node_get_storage_health(v1::NodeGetStorageHealthRequest::default())
        .await?;
    Ok(resp.into_inner().backend_health)
}

/// Every entry of a whole ControllerListVolumeHealth cycle with `max` per page (0: as many as
/// the driver likes), or the refusal of a page. Panics on a page larger than `max` and on a
/// cycle that never ends.
pub async fn list_volume_health(
    ctrl: &mut ControllerClient<Channel>,
    max: i32,
) -> Result<Vec<v1::VolumeHealth>, Status> {
    let mut token = String::new();
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let resp = ctrl
            .controller_list_volume_health(v1::ControllerListVolumeHealthRequest {
                max_entries: max,
                starting_token: token.clone(),
                ..Default::default()
            })
            .await?
            .into_inner();
        assert!(
            max == 0 || resp.entries.len() <= max as usize,
            "page larger than max_entries"
        );
        out.extend(resp.entries);
        if resp.next_token.is_empty() {
            return Ok(out);
        }
        token = resp.next_token;
    }
    panic!("listing never ended");
}
