//! Finding out which health RPCs a driver supports, and the capability entries a driver answers
//! with.

use std::time::Duration;

use tonic::transport::Channel;

use crate::error::{Error, Result};
use crate::v1;
use crate::v1::controller_service_capability::rpc::Type as ControllerRpc;
use crate::v1::node_service_capability::rpc::Type as NodeRpc;

/// Message recorded when a plugin breaks the LIST-implies-GET rule.
pub const LIST_WITHOUT_GET: &str = "controller reports LIST_VOLUME_HEALTH without GET_VOLUME_HEALTH, \
     but CSI says a plugin with LIST_VOLUME_HEALTH MUST also support GET_VOLUME_HEALTH; \
     recovered volumes will be cleared only after two complete list cycles";

/// What a driver offers for volume and storage health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// `GetPluginInfo.name`.
    pub driver_name: String,
    /// `GetPluginInfo.vendor_version`.
    pub vendor_version: String,
    /// How the controller side can be asked about volume health.
    pub controller: ControllerHealthMode,
    /// Which node health RPCs are available.
    pub node: NodeHealthModes,
    /// Spec rules the driver breaks, in words.
    pub violations: Vec<String>,
}

/// Controller-side volume health support.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControllerHealthMode {
    /// LIST_VOLUME_HEALTH; `get` says whether GET_VOLUME_HEALTH is there too
    /// (`false` is a spec violation).
    List {
        /// GET_VOLUME_HEALTH is also reported.
        get: bool,
    },
    /// GET_VOLUME_HEALTH only.
    Get,
    /// No controller health RPCs, or no Controller service at all.
    None,
}

/// Node-side health support.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeHealthModes {
    /// NodeGetVolumeHealth (node capability GET_VOLUME_HEALTH).
    pub volume: bool,
    /// NodeGetStorageHealth (node capability GET_STORAGE_HEALTH).
    pub storage: bool,
}

/// Calls GetPluginInfo, ControllerGetCapabilities and NodeGetCapabilities, each
/// bounded by `timeout`. A service the plugin does not serve (UNIMPLEMENTED)
/// gives that side no health modes; any other failure is an error.
pub async fn probe(channel: Channel, timeout: Duration) -> Result<Capabilities> {
    let mut identity = v1::identity_client::IdentityClient::new(channel.clone());
    let info = call(
        "GetPluginInfo",
        timeout,
        |req| identity.get_plugin_info(req),
        v1::GetPluginInfoRequest {},
    )
    .await?;
    let (controller, violations) = probe_controller(channel.clone(), timeout).await?;
    let node = probe_node(channel, timeout).await?;
    Ok(Capabilities {
        driver_name: info.name,
        vendor_version: info.vendor_version,
        controller,
        node,
        violations,
    })
}

/// The controller side alone: its health mode and any spec violations.
pub async fn probe_controller(
    channel: Channel,
    timeout: Duration,
) -> Result<(ControllerHealthMode, Vec<String>)> {
    let mut client = v1::controller_client::ControllerClient::new(channel);
    let caps = match call(
        "ControllerGetCapabilities",
        timeout,
        |req| client.controller_get_capabilities(req),
        v1::ControllerGetCapabilitiesRequest {},
    )
    .await
    {
        Ok(resp) => resp.capabilities,
        Err(e) if is_unimplemented(&e) => return Ok((ControllerHealthMode::None, Vec::new())),
        Err(e) => return Err(e),
    };
    let has = |want: ControllerRpc| controller_offers(&caps, want);
    let (list, get) = (
        has(ControllerRpc::ListVolumeHealth),
        has(ControllerRpc::GetVolumeHealth),
    );
    Ok(match (list, get) {
        (true, get) => {
            let violations = if get {
                Vec::new()
            } else {
                vec![LIST_WITHOUT_GET.to_string()]
            };
            (ControllerHealthMode::List { get }, violations)
        }
        (false, true) => (ControllerHealthMode::Get, Vec::new()),
        (false, false) => (ControllerHealthMode::None, Vec::new()),
    })
}

/// The node side alone.
pub async fn probe_node(channel: Channel, timeout: Duration) -> Result<NodeHealthModes> {
    let mut client = v1::node_client::NodeClient::new(channel);
    let caps = match call(
        "NodeGetCapabilities",
        timeout,
        |req| client.node_get_capabilities(req),
        v1::NodeGetCapabilitiesRequest {},
    )
    .await
    {
        Ok(resp) => resp.capabilities,
        Err(e) if is_unimplemented(&e) => return Ok(NodeHealthModes::default()),
        Err(e) => return Err(e),
    };
    let has = |want: NodeRpc| node_offers(&caps, want);
    Ok(NodeHealthModes {
        volume: has(NodeRpc::GetVolumeHealth),
        storage: has(NodeRpc::GetStorageHealth),
    })
}

/// The ControllerGetCapabilities entry that advertises `rpc`: a
/// [`v1::controller_service_capability::rpc::Type`], or a bare number (such as one CSI v1.13
/// reserves).
pub fn controller_rpc(rpc: impl Into<i32>) -> v1::ControllerServiceCapability {
    v1::ControllerServiceCapability {
        r#type: Some(v1::controller_service_capability::Type::Rpc(
            v1::controller_service_capability::Rpc { r#type: rpc.into() },
        )),
    }
}

/// The NodeGetCapabilities entry that advertises `rpc`: a
/// [`v1::node_service_capability::rpc::Type`], or a bare number (such as one CSI v1.13 reserves).
pub fn node_rpc(rpc: impl Into<i32>) -> v1::NodeServiceCapability {
    v1::NodeServiceCapability {
        r#type: Some(v1::node_service_capability::Type::Rpc(
            v1::node_service_capability::Rpc { r#type: rpc.into() },
        )),
    }
}

/// The RPC numbers a ControllerGetCapabilities answer advertises, in its order (numbers this
/// version does not name included).
pub fn controller_rpcs(
    capabilities: &[v1::ControllerServiceCapability],
) -> impl Iterator<Item = i32> + '_ {
    use v1::controller_service_capability::Type;
    capabilities
        .iter()
        .filter_map(|c| c.r#type.as_ref().map(|Type::Rpc(rpc)| rpc.r#type))
}

/// The RPC numbers a NodeGetCapabilities answer advertises, in its order.
pub fn node_rpcs(capabilities: &[v1::NodeServiceCapability]) -> impl Iterator<Item = i32> + '_ {
    use v1::node_service_capability::Type;
    capabilities
        .iter()
        .filter_map(|c| c.r#type.as_ref().map(|Type::Rpc(rpc)| rpc.r#type))
}

/// Whether a ControllerGetCapabilities answer advertises `rpc`: a [`ControllerRpc`], or a bare
/// number (such as one CSI v1.13 reserves).
pub fn controller_offers(
    capabilities: &[v1::ControllerServiceCapability],
    rpc: impl Into<i32>,
) -> bool {
    let rpc = rpc.into();
    controller_rpcs(capabilities).any(|r| r == rpc)
}

/// Whether a NodeGetCapabilities answer advertises `rpc`: a [`NodeRpc`] or a bare number.
pub fn node_offers(capabilities: &[v1::NodeServiceCapability], rpc: impl Into<i32>) -> bool {
    let rpc = rpc.into();
    node_rpcs(capabilities).any(|r| r == rpc)
}

fn is_unimplemented(e: &Error) -> bool {
    matches!(
        e,
        Error::Rpc {
            code: tonic::Code::Unimplemented,
            ..
        }
    )
}

/// Runs one unary RPC with a gRPC deadline and a local timeout.
async fn call<Req, Resp, F, Fut>(
    rpc: &'static str,
    timeout: Duration,
    f: F,
    msg: Req,
) -> Result<Resp>
where
    F: FnOnce(tonic::Request<Req>) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<tonic::Response<Resp>, tonic::Status>>,
{
    let mut request = tonic::Request::new(msg);
    request.set_timeout(timeout);
    match tokio::time::timeout(timeout, f(request)).await {
        Ok(Ok(resp)) => Ok(resp.into_inner()),
        Ok(Err(status)) => Err(Error::rpc(rpc, &status)),
        Err(_) => Err(Error::Timeout { rpc, timeout }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_reads_named_and_reserved_numbers_and_skips_empty_entries() {
        let controller = [
            controller_rpc(ControllerRpc::ListVolumeHealth),
            v1::ControllerServiceCapability { r#type: None },
            controller_rpc(15),
        ];
        assert_eq!(
            controller_rpcs(&controller).collect::<Vec<_>>(),
            [ControllerRpc::ListVolumeHealth as i32, 15]
        );
        assert!(controller_offers(
            &controller,
            ControllerRpc::ListVolumeHealth
        ));
        assert!(controller_offers(&controller, 15));
        assert!(!controller_offers(
            &controller,
            ControllerRpc::GetVolumeHealth
        ));
        let node = [
            v1::NodeServiceCapability { r#type: None },
            node_rpc(NodeRpc::GetStorageHealth),
        ];
        assert_eq!(
            node_rpcs(&node).collect::<Vec<_>>(),
            [NodeRpc::GetStorageHealth as i32]
        );
        assert!(node_offers(&node, NodeRpc::GetStorageHealth));
        assert!(!node_offers(&node, NodeRpc::GetVolumeHealth));
        assert!(!node_offers(&[], NodeRpc::GetVolumeHealth));
    }
}
