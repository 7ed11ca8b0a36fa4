//! The boundary to the driver's controller health RPCs, so the cycle logic runs against fakes in tests.

use std::future::Future;
use volhealth_csi::v1;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;

/// One page of ControllerListVolumeHealth.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListPage {
    /// The page's entries.
    pub entries: Vec<v1::VolumeHealth>,
    /// Token of the next page; empty on the last one.
    pub next_token: String,
}

/// A failed health RPC (never carries secrets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct ProbeError {
    /// The gRPC status code (`DeadlineExceeded` for our own timeout).
    pub code: tonic::Code,
    /// What went wrong.
    pub message: String,
}

impl ProbeError {
    /// Whether the error suggests the driver went away or changed (so capabilities are probed again).
    pub fn calls_for_reprobe(&self) -> bool {
        matches!(
            self.code,
            tonic::Code::Unavailable
                | tonic::Code::Unknown
                | tonic::Code::Cancelled
                | tonic::Code::Unimplemented
        )
    }
}

impl From<tonic::Status> for ProbeError {
    fn from(s: tonic::Status) -> Self {
        ProbeError {
            code: s.code(),
            message: s.message().to_string(),
        }
    }
}

/// The controller health RPCs of one driver.
pub trait HealthSource: Send + Sync + 'static {
    /// One ControllerListVolumeHealth page.
    fn list_page(
        &self,
        max_entries: i32,
        starting_token: String,
    ) -> impl Future<Output = Result<ListPage, ProbeError>> + Send;
    /// ControllerGetVolumeHealth of one volume; an empty list means healthy.
    fn get(
        &self,
        volume_id: String,
    ) -> impl Future<Output = Result<Vec<VolumeHealthEntry>, ProbeError>> + Send;
}

/// The RPC names used as the `method` label.
pub mod method {
    /// ControllerListVolumeHealth.
    pub const LIST: &str = "ControllerListVolumeHealth";
    /// ControllerGetVolumeHealth.
    pub const GET: &str = "ControllerGetVolumeHealth";
}
