//! Which legacy health answers a driver offers, from the capability numbers that CSI v1.13.0
//! reserves (they survive decoding as plain integers).

use crate::wire;
use std::time::Duration;
use volhealth_csi::capabilities::{controller_offers, node_offers};
use volhealth_csi::v1;

/// The legacy health a driver advertises.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LegacyModes {
    /// Controller `VOLUME_CONDITION` with `LIST_VOLUMES`.
    pub list_volumes: bool,
    /// Controller `VOLUME_CONDITION` with `GET_VOLUME`.
    pub get_volume: bool,
    /// Node `VOLUME_CONDITION` with `GET_VOLUME_STATS`.
    pub node_volume_stats: bool,
}

impl LegacyModes {
    /// Whether the controller side can be asked at all.
    pub fn controller(&self) -> bool {
        self.list_volumes || self.get_volume
    }

    /// From the controller's capability answer.
    pub fn from_controller(caps: &[v1::ControllerServiceCapability]) -> LegacyModes {
        let has = |want: i32| controller_offers(caps, want);
        let condition = has(wire::CONTROLLER_VOLUME_CONDITION);
        LegacyModes {
            list_volumes: condition && has(wire::CONTROLLER_LIST_VOLUMES),
            get_volume: condition && has(wire::CONTROLLER_GET_VOLUME),
            node_volume_stats: false,
        }
    }

    /// From the node's capability answer.
    pub fn from_node(caps: &[v1::NodeServiceCapability]) -> LegacyModes {
        let has = |want: i32| node_offers(caps, want);
        LegacyModes {
            node_volume_stats: has(wire::NODE_VOLUME_CONDITION) && has(wire::NODE_GET_VOLUME_STATS),
            ..LegacyModes::default()
        }
    }
}

/// Asks the driver's Controller and Node services for their capabilities, each within
/// `timeout`; a service it does not serve (UNIMPLEMENTED) offers nothing.
pub async fn probe(
    channel: tonic::transport::Channel,
    timeout: Duration,
) -> Result<LegacyModes, tonic::Status> {
    let mut controller = v1::controller_client::ControllerClient::new(channel.clone());
    let answer = controller
        .controller_get_capabilities(timed(v1::ControllerGetCapabilitiesRequest {}, timeout))
        .await;
    let ctrl = offered(answer, |r| LegacyModes::from_controller(&r.capabilities))?;
    let mut node = v1::node_client::NodeClient::new(channel);
    let answer = node
        .node_get_capabilities(timed(v1::NodeGetCapabilitiesRequest {}, timeout))
        .await;
    let node = offered(answer, |r| LegacyModes::from_node(&r.capabilities))?;
    Ok(LegacyModes {
        node_volume_stats: node.node_volume_stats,
        ..ctrl
    })
}

/// `message` as a request with `timeout`.
fn timed<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

/// What `read` makes of a service's capability answer; a service the driver does not serve
/// (UNIMPLEMENTED) offers nothing.
fn offered<T>(
    answer: Result<tonic::Response<T>, tonic::Status>,
    read: impl FnOnce(T) -> LegacyModes,
) -> Result<LegacyModes, tonic::Status> {
    match answer {
        Ok(r) => Ok(read(r.into_inner())),
        Err(s) if s.code() == tonic::Code::Unimplemented => Ok(LegacyModes::default()),
        Err(s) => Err(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volhealth_csi::capabilities::{controller_rpc, node_rpc};

    fn ctrl(types: &[i32]) -> Vec<v1::ControllerServiceCapability> {
        types.iter().map(|t| controller_rpc(*t)).collect()
    }

    #[test]
    fn the_condition_capability_is_needed_beside_the_rpc() {
        assert_eq!(
            LegacyModes::from_controller(&ctrl(&[3, 11, 12])),
            LegacyModes {
                list_volumes: true,
                get_volume: true,
                node_volume_stats: false
            }
        );
        assert!(!LegacyModes::from_controller(&ctrl(&[3, 12])).controller());
        assert_eq!(
            LegacyModes::from_controller(&ctrl(&[11, 12])),
            LegacyModes {
                list_volumes: false,
                get_volume: true,
                node_volume_stats: false
            }
        );
        let node = |types: &[i32]| types.iter().map(|t| node_rpc(*t)).collect::<Vec<_>>();
        assert!(LegacyModes::from_node(&node(&[2, 4])).node_volume_stats);
        assert!(!LegacyModes::from_node(&node(&[4])).node_volume_stats);
        assert!(!LegacyModes::from_node(&node(&[2, 7])).node_volume_stats);
    }
}
