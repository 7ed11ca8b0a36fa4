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

/// How a writer treats a driver that speaks only the legacy shape: `--legacy-volume-condition`,
/// `--legacy-rules` and `--legacy-debounce`, as the monitor, the agent and the proxy take them.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Probe a driver through the bridge when it advertises the legacy capability and not the
    /// new ones (`auto`); `false` = `off`.
    pub enabled: bool,
    /// The mapping rules: the user's, then the shipped ones.
    pub rules: Arc<Rules>,
    /// Consecutive NOT_FOUND answers about a volume the caller knows exists that make a
    /// `VolumeNotFound` condition.
    pub debounce: u32,
}

/// Default of `--legacy-debounce`.
pub const DEFAULT_DEBOUNCE: u32 = 2;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: true,
            rules: Arc::new(Rules::shipped().unwrap_or_default()),
            debounce: DEFAULT_DEBOUNCE,
        }
    }
}

impl Settings {
    /// A bridge for `driver` with these rules and debounce.
    pub fn bridge(&self, driver: impl Into<String>) -> Bridge {
        Bridge::new(driver, self.rules.clone(), self.debounce)
    }
}

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

impl Bridge {
    /// The answer about `volume_id` of a legacy call `rpc`: its condition (`Ok(None)` when the
    /// answer carried none), or the driver's refusal.
    fn answer(
        &self,
        volume_id: String,
        rpc: &str,
        result: Result<Option<wire::VolumeCondition>, tonic::Status>,
    ) -> Result<volhealth_csi::v1::VolumeHealth, tonic::Status> {
        let condition = match result {
            Ok(c) => c,
            Err(s) if s.code() == tonic::Code::NotFound => {
                return match self.not_found(&volume_id, rpc, &s) {
                    Some(entry) => Ok(volhealth_csi::v1::VolumeHealth {
                        volume_id,
                        health_statuses: vec![entry],
                    }),
                    None => Err(s),
                };
            }
            Err(s) => return Err(s),
        };
        self.answered(&volume_id);
        match self.entries(condition.as_ref()) {
            Some(health_statuses) => Ok(volhealth_csi::v1::VolumeHealth {
                volume_id,
                health_statuses,
            }),
            None => Err(no_condition(rpc, &volume_id)),
        }
    }
}

/// The error for an answer that carried no condition: nothing to report, which is not healthy.
pub fn no_condition(rpc: &str, volume_id: &str) -> tonic::Status {
    tonic::Status::unavailable(format!(
        "{rpc} carried no volume_condition for volume {volume_id:?}: nothing to report"
    ))
}

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
