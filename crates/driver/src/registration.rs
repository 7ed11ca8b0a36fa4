//! The kubelet plugin-registration API, so a node agent can discover the driver the way the
//! kubelet does: a socket `<registration-dir>/<driver-name>-reg.sock` answering GetInfo.

use std::path::{Path, PathBuf};
use tonic::{Request, Response, Status};
use volhealth_csi::registration::{self as reg, registration_server::Registration};

/// Versions of the CSI plugin API the driver tells the kubelet it speaks.
pub const SUPPORTED_VERSIONS: [&str; 1] = ["1.0.0"];

/// Registration socket path of a driver in a registration directory.
pub fn socket_path(dir: &Path, driver_name: &str) -> PathBuf {
    dir.join(format!("{driver_name}-reg.sock"))
}

/// The registration service.
pub struct RegistrationService {
    driver_name: String,
    csi_socket: PathBuf,
}

impl RegistrationService {
    /// Describes the driver `driver_name` serving CSI at `csi_socket`.
    pub fn new(driver_name: String, csi_socket: PathBuf) -> Self {
        RegistrationService {
            driver_name,
            csi_socket,
        }
    }
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(
        &self,
        _req: Request<reg::InfoRequest>,
    ) -> Result<Response<reg::PluginInfo>, Status> {
        Ok(Response::new(reg::PluginInfo {
            r#type: reg::CSI_PLUGIN.to_string(),
            name: self.driver_name.clone(),
            endpoint: self.csi_socket.display().to_string(),
            supported_versions: SUPPORTED_VERSIONS.iter().map(|s| s.to_string()).collect(),
        }))
    }

    async fn notify_registration_status(
        &self,
        req: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let status = req.into_inner();
        if status.plugin_registered {
            tracing::info!(driver = %self.driver_name, "registered with the node agent");
        } else {
            tracing::warn!(driver = %self.driver_name, error = %status.error, "registration was refused");
        }
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}
