//! Health from drivers that speak the legacy CSI `VOLUME_CONDITION` shape (CSI v1.3.0 – v1.12.0),
//! answered as the v1.13 health RPCs answer, so that the monitor, the agent and the health proxy
//! treat a legacy driver like one with the new RPCs.
//!
//! One mapping, documented in `docs/legacy-drivers.md`:
//! - condition absent → no report (an error the caller keeps what is stored on), never healthy;
//! - present with `abnormal = false` → healthy (no entries);
//! - `abnormal = true` → one entry, from the first matching [`rules::Rule`] or
//!   `Degraded` / `VolumeConditionAbnormal` with the driver's message;
//! - `NOT_FOUND` for a volume the caller knows exists → `Inaccessible` / `VolumeNotFound` once
//!   it has been answered [`Bridge::debounce`] times in a row; any other error → no report.

pub mod capabilities;
pub mod controller;
pub mod node;
pub mod rules;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use volhealth_csi::v1::VolumeHealthErrorType;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;

pub use capabilities::{LegacyModes, probe};
pub use controller::LegacyController;
pub use node::LegacyNode;
pub use rules::{Rules, RulesError};

/// The reason of a volume the driver answers NOT_FOUND for.
pub const NOT_FOUND_REASON: &str = "VolumeNotFound";

/// Most volumes whose NOT_FOUND answers are counted at once; past it the counts start over, so a
/// driver that answers NOT_FOUND for every id cannot grow memory without bound.
const MAX_COUNTED: usize = 65_536;

/// What every legacy call of one driver shares: its name, the rules and the NOT_FOUND counts.
#[derive(Debug, Clone)]
pub struct Bridge {
    driver: String,
    rules: Arc<Rules>,
    debounce: u32,
    not_found: Arc<Mutex<HashMap<String, u32>>>,
}

impl Bridge {
    /// A bridge for `driver` with `rules`; NOT_FOUND becomes a condition after `debounce`
    /// consecutive answers (at least 1).
    pub fn new(driver: impl Into<String>, rules: Arc<Rules>, debounce: u32) -> Bridge {
        Bridge {
            driver: driver.into(),
            rules,
            debounce: debounce.max(1),
            not_found: Arc::default(),
        }
    }

    /// The driver's name.
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// How many consecutive NOT_FOUND answers make a condition.
    pub fn debounce(&self) -> u32 {
        self.debounce
    }

    /// The entries for a legacy condition; `None` when the driver sent none (no report).
    pub fn entries(
        &self,
        condition: Option<&wire::VolumeCondition>,
    ) -> Option<Vec<VolumeHealthEntry>> {
        let c = condition?;
        if !c.abnormal {
            return Some(Vec::new());
        }
        let m = self.rules.map(&self.driver, &c.message);
        Some(vec![VolumeHealthEntry {
            status: m.status.error_type() as i32,
            reason: m.reason,
            message: m.message,
        }])
    }

    /// An answer about `volume_id` arrived: its NOT_FOUND count starts over.
    fn answered(&self, volume_id: &str) {
        let mut counts = self.not_found.lock().unwrap_or_else(|p| p.into_inner());
        counts.remove(volume_id);
    }

    /// The driver answered NOT_FOUND about `volume_id`: the entry to report once the answers in
    /// a row reach the debounce, `None` before.
    fn not_found(
        &self,
        volume_id: &str,
        rpc: &str,
        status: &tonic::Status,
    ) -> Option<VolumeHealthEntry> {
        let mut counts = self.not_found.lock().unwrap_or_else(|p| p.into_inner());
        if counts.len() >= MAX_COUNTED && !counts.contains_key(volume_id) {
            counts.clear();
        }
        let n = counts.entry(volume_id.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        (*n >= self.debounce).then(|| VolumeHealthEntry {
            status: VolumeHealthErrorType::Inaccessible as i32,
            reason: NOT_FOUND_REASON.to_string(),
            message: format!("{rpc} answers NOT_FOUND: {}", status.message()),
        })
    }
}

/// The error for an answer that carried no condition: nothing to report, which is not healthy.
pub fn no_condition(rpc: &str, volume_id: &str) -> tonic::Status {
    tonic::Status::unavailable(format!(
        "{rpc} carried no volume_condition for volume {volume_id:?}: nothing to report"
    ))
}
