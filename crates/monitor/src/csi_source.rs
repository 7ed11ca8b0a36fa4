//! [`HealthSource`] over a real CSI controller socket.

use crate::config::Legacy;
use crate::engine::{CapabilityError, CapabilitySource, DriverInfo, Mode};
use crate::source::{HealthSource, ListPage, ProbeError};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use volhealth_csi::v1;
use volhealth_csi::v1::controller_client::ControllerClient;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_legacy_bridge::LegacyController;

/// What stands in for a secret value a driver echoed in its error text.
pub const REDACTED: &str = "[redacted]";

/// The `secrets` passed to the health RPCs, shared by every clone and replaced when the Secret
/// changes; its Debug output never shows the values.
#[derive(Clone, Default)]
pub struct Secrets(Arc<RwLock<Arc<HashMap<String, String>>>>);

impl Secrets {
    /// Wraps the Secret's data.
    pub fn new(data: HashMap<String, String>) -> Self {
        Secrets(Arc::new(RwLock::new(Arc::new(data))))
    }

    fn current(&self) -> Arc<HashMap<String, String>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn map(&self) -> HashMap<String, String> {
        (*self.current()).clone()
    }

    /// Uses `data` from the next call on; returns whether it differs from what was used.
    pub fn replace(&self, data: HashMap<String, String>) -> bool {
        let mut held = self.0.write().unwrap_or_else(|p| p.into_inner());
        if **held == data {
            return false;
        }
        *held = Arc::new(data);
        true
    }

    /// `text` with every value of the Secret replaced by [`REDACTED`], longest first, so a
    /// driver that echoes what it was sent does not put a credential into logs or metrics.
    pub fn redact(&self, text: &str) -> String {
        let data = self.current();
        let mut values: Vec<&str> = data
            .values()
            .map(String::as_str)
            .filter(|v| !v.is_empty())
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        let mut out = text.to_string();
        for v in values {
            if out.contains(v) {
                out = out.replace(v, REDACTED);
            }
        }
        out
    }

    /// A driver's refusal as a probe error, with the Secret's values redacted from its text.
    fn error(&self, status: tonic::Status) -> ProbeError {
        let mut e = ProbeError::from(status);
        e.message = self.redact(&e.message);
        e
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} keys, redacted)", self.current().len())
    }
}

/// Where the capability probe leaves the bridge when the driver speaks only the legacy
/// VOLUME_CONDITION shape, and the health source finds it: `None` = the v1.13 RPCs.
pub type LegacySlot = Arc<RwLock<Option<LegacyController>>>;

/// Calls the driver's Controller service over a tonic channel: its v1.13 health RPCs, or,
/// for a legacy driver, ListVolumes and ControllerGetVolume through the bridge.
#[derive(Clone, Debug)]
pub struct CsiHealthSource {
    channel: tonic::transport::Channel,
    secrets: Secrets,
    legacy: LegacySlot,
}

impl CsiHealthSource {
    /// A source on `channel` that sends `secrets` with every call, and asks through the bridge
    /// whenever `legacy` holds one.
    pub fn new(channel: tonic::transport::Channel, secrets: Secrets, legacy: LegacySlot) -> Self {
        CsiHealthSource {
            channel,
            secrets,
            legacy,
        }
    }

    fn legacy(&self) -> Option<LegacyController> {
        self.legacy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait::async_trait]
impl HealthSource for CsiHealthSource {
    async fn list_page(
        &self,
        max_entries: i32,
        starting_token: String,
    ) -> Result<ListPage, ProbeError> {
        if let Some(legacy) = self.legacy() {
            let (entries, next_token) = legacy
                .list_page(max_entries, starting_token)
                .await
                .map_err(|s| self.secrets.error(s))?;
            return Ok(ListPage {
                entries,
                next_token,
            });
        }
        let mut client = ControllerClient::new(self.channel.clone());
        let req = v1::ControllerListVolumeHealthRequest {
            max_entries,
            starting_token,
            secrets: self.secrets.map(),
        };
        let resp = client
            .controller_list_volume_health(req)
            .await
            .map_err(|s| self.secrets.error(s))?
            .into_inner();
        Ok(ListPage {
            entries: resp.entries,
            next_token: resp.next_token,
        })
    }

    async fn get(&self, volume_id: String) -> Result<Vec<VolumeHealthEntry>, ProbeError> {
        if let Some(legacy) = self.legacy() {
            let id = volume_id.clone();
            let health = legacy
                .get(volume_id)
                .await
                .map_err(|s| self.secrets.error(s))?;
            return volhealth_writer::volume_answer(&id, Some(health));
        }
        let mut client = ControllerClient::new(self.channel.clone());
        let req = v1::ControllerGetVolumeHealthRequest {
            volume_id,
            secrets: self.secrets.map(),
        };
        let id = req.volume_id.clone();
        let resp = client
            .controller_get_volume_health(req)
            .await
            .map_err(|s| self.secrets.error(s))?
            .into_inner();
        volhealth_writer::volume_answer(&id, resp.volume_health)
    }
}

/// [`CapabilitySource`] over the same channel (GetPluginInfo + the capability RPCs). A driver
/// with no v1.13 controller health but the legacy VOLUME_CONDITION capability is probed through
/// the bridge when `legacy` is enabled: the probe puts a bridge into the slot the health source
/// reads, and takes it out again when the driver gains the new RPCs.
#[derive(Clone, Debug)]
pub struct CsiCapabilities {
    channel: tonic::transport::Channel,
    timeout: std::time::Duration,
    legacy: Option<(Legacy, LegacySlot)>,
    annotation: bool,
}

impl CsiCapabilities {
    /// Probes over `channel`, each RPC within `timeout`, without the bridge.
    pub fn new(channel: tonic::transport::Channel, timeout: std::time::Duration) -> Self {
        CsiCapabilities {
            channel,
            timeout,
            legacy: None,
            annotation: false,
        }
    }

    /// Reads the claims' health annotation for a driver with no health RPC (new or legacy).
    pub fn with_annotation(mut self, on: bool) -> Self {
        self.annotation = on;
        self
    }

    /// Probes for the legacy capability too when `legacy.enabled`, filling `slot`.
    pub fn with_legacy(mut self, legacy: Legacy, slot: LegacySlot) -> Self {
        self.legacy = legacy.enabled.then_some((legacy, slot));
        self
    }
}

#[async_trait::async_trait]
impl CapabilitySource for CsiCapabilities {
    async fn probe(&self) -> Result<DriverInfo, CapabilityError> {
        let caps = volhealth_csi::capabilities::probe(self.channel.clone(), self.timeout)
            .await
            .map_err(|e| CapabilityError::Capabilities(e.to_string()))?;
        let mut info = DriverInfo {
            driver_name: caps.driver_name.clone(),
            mode: Mode::from_capabilities(&caps.controller),
            violations: caps.violations.clone(),
            legacy: false,
        };
        let Some((legacy, slot)) = &self.legacy else {
            if info.mode == Mode::Off && self.annotation {
                info.mode = Mode::Annotation;
            }
            return Ok(info);
        };
        let mut bridge = None;
        if info.mode == Mode::Off {
            let modes = volhealth_legacy_bridge::probe(self.channel.clone(), self.timeout)
                .await
                .map_err(|s| CapabilityError::LegacyCapabilities(s.message().to_string()))?;
            if modes.controller() {
                info.mode = if modes.list_volumes {
                    Mode::List {
                        get: modes.get_volume,
                    }
                } else {
                    Mode::Get
                };
                info.legacy = true;
                let b = legacy.bridge(info.driver_name.clone());
                bridge = Some(LegacyController::new(self.channel.clone(), b, modes));
            }
        }
        *slot.write().unwrap_or_else(|p| p.into_inner()) = bridge;
        if info.mode == Mode::Off && self.annotation {
            info.mode = Mode::Annotation;
        }
        Ok(info)
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

    #[test]
    fn echoed_values_are_redacted_and_replacement_is_seen_by_every_clone() {
        let s = Secrets::new(HashMap::from([
            ("user".to_string(), "svc".to_string()),
            ("password".to_string(), "svc-hunter2".to_string()),
            ("empty".to_string(), String::new()),
        ]));
        let e = s.error(tonic::Status::unauthenticated(
            "login svc/svc-hunter2 refused by the array",
        ));
        assert_eq!(e.code, tonic::Code::Unauthenticated);
        assert_eq!(
            e.message, "login [redacted]/[redacted] refused by the array",
            "longest value first, so no part of it survives"
        );
        let clone = s.clone();
        assert!(!s.replace(clone.map()), "the same data is no change");
        assert!(s.replace(HashMap::from([("password".to_string(), "n3w".to_string())])));
        assert_eq!(clone.map().get("password").map(String::as_str), Some("n3w"));
        assert_eq!(
            clone.redact("n3w and svc-hunter2"),
            "[redacted] and svc-hunter2"
        );
    }
}
