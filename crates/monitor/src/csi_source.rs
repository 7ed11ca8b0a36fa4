//! [`HealthSource`] over a real CSI controller socket.

use crate::engine::{CapabilitySource, DriverInfo, Mode};
use crate::source::{HealthSource, ListPage, ProbeError};
use std::collections::HashMap;
use std::sync::Arc;
use volhealth_csi::v1;
use volhealth_csi::v1::controller_client::ControllerClient;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;

/// The `secrets` passed to the health RPCs; its Debug output never shows the values.
#[derive(Clone, Default)]
pub struct Secrets(Arc<HashMap<String, String>>);

impl Secrets {
    /// Wraps the Secret's data.
    pub fn new(data: HashMap<String, String>) -> Self {
        Secrets(Arc::new(data))
    }
    fn map(&self) -> HashMap<String, String> {
        (*self.0).clone()
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} keys, redacted)", self.0.len())
    }
}

/// Calls the driver's Controller service over a tonic channel.
#[derive(Clone, Debug)]
pub struct CsiHealthSource {
    channel: tonic::transport::Channel,
    secrets: Secrets,
}

impl CsiHealthSource {
    /// A source on `channel` that sends `secrets` with every call.
    pub fn new(channel: tonic::transport::Channel, secrets: Secrets) -> Self {
        CsiHealthSource { channel, secrets }
    }
}

impl HealthSource for CsiHealthSource {
    async fn list_page(
        &self,
        max_entries: i32,
        starting_token: String,
    ) -> Result<ListPage, ProbeError> {
        let mut client = ControllerClient::new(self.channel.clone());
        let req = v1::ControllerListVolumeHealthRequest {
            max_entries,
            starting_token,
            secrets: self.secrets.map(),
        };
        let resp = client
            .controller_list_volume_health(req)
            .await?
            .into_inner();
        Ok(ListPage {
            entries: resp.entries,
            next_token: resp.next_token,
        })
    }

    async fn get(&self, volume_id: String) -> Result<Vec<VolumeHealthEntry>, ProbeError> {
        let mut client = ControllerClient::new(self.channel.clone());
        let req = v1::ControllerGetVolumeHealthRequest {
            volume_id,
            secrets: self.secrets.map(),
        };
        let id = req.volume_id.clone();
        let resp = client.controller_get_volume_health(req).await?.into_inner();
        volhealth_writer::volume_answer(&id, resp.volume_health)
    }
}

/// [`CapabilitySource`] over the same channel (GetPluginInfo + the capability RPCs).
#[derive(Clone, Debug)]
pub struct CsiCapabilities {
    channel: tonic::transport::Channel,
    timeout: std::time::Duration,
}

impl CsiCapabilities {
    /// Probes over `channel`, each RPC within `timeout`.
    pub fn new(channel: tonic::transport::Channel, timeout: std::time::Duration) -> Self {
        CsiCapabilities { channel, timeout }
    }
}

impl CapabilitySource for CsiCapabilities {
    async fn probe(&self) -> Result<DriverInfo, String> {
        let caps = volhealth_csi::capabilities::probe(self.channel.clone(), self.timeout)
            .await
            .map_err(|e| format!("probing the driver's capabilities: {e}"))?;
        Ok(DriverInfo {
            driver_name: caps.driver_name.clone(),
            mode: Mode::from_capabilities(&caps.controller),
            violations: caps.violations.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_debug_is_redacted() {
        let s = Secrets::new(HashMap::from([(
            "password".to_string(),
            "hunter2".to_string(),
        )]));
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("password"),
            "{shown}"
        );
    }
}
