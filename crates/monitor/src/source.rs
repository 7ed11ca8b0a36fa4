//! The boundary to the driver's controller health RPCs, so the cycle logic runs against fakes in tests.

use async_trait::async_trait;
use volhealth_csi::v1;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
pub use volhealth_writer::ProbeError;
pub use volhealth_writer::probe::method;

/// One page of ControllerListVolumeHealth.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListPage {
    /// The page's entries.
    pub entries: Vec<v1::VolumeHealth>,
    /// Token of the next page; empty on the last one.
    pub next_token: String,
}

/// The controller health RPCs of one driver.
#[async_trait]
pub trait HealthSource: Send + Sync {
    /// One ControllerListVolumeHealth page.
    async fn list_page(
        &self,
        max_entries: i32,
        starting_token: String,
    ) -> Result<ListPage, ProbeError>;
    /// ControllerGetVolumeHealth of one volume; an empty list means healthy. An answer without
    /// `volume_health`, or about another volume, is an error ([`volhealth_writer::volume_answer`]).
    async fn get(&self, volume_id: String) -> Result<Vec<VolumeHealthEntry>, ProbeError>;
}
