//! The components `up` runs only when asked: the CSIStorageHealth scheduler extender
//! (`--with-extender`) and the remediation controller (`--with-remediation`), their flags,
//! RBAC and child processes.

use super::{Progress, Running, grant_rbac, until_ready};
use crate::failure::Context as _;
use crate::failure::Result;
use crate::up::endpoints::MetricsPorts;
use crate::up::layout::Layout;
use crate::up::rbac;
use std::path::PathBuf;

/// The optional components `up` starts, and their settings.
#[derive(Debug, Clone)]
pub struct Extras {
    /// Also run the CSIStorageHealth scheduler extender (`volhealth scheduler-extender`).
    pub with_extender: bool,
    /// Also run the remediation controller (`volhealth remediate`) as its own service account.
    pub with_remediation: bool,
    /// The remediation policy file (default: deploy/kubernetes/remediate/policy.yaml).
    pub remediation_policy: Option<PathBuf>,
    /// Whether the remediation controller only says what it would do.
    pub remediation_dry_run: bool,
    /// Where the extender serves POST /filter and its metrics.
    pub extender_listen: String,
}

impl Extras {
    /// The components beyond the monitor and the agents that get a metrics port.
    pub fn metrics_components(&self) -> &'static [&'static str] {
        if self.with_remediation {
            &["remediate"]
        } else {
            &[]
        }
    }

    /// Starts the components asked for, each with the RBAC deploy/kubernetes ships.
    pub(super) async fn start(
        &self,
        client: &kube::Client,
        layout: &Layout,
        metrics: &MetricsPorts,
        running: &mut Running,
    ) -> Result<()> {
        if self.with_extender {
            grant_rbac(client, "the scheduler extender", rbac::EXTENDER_RBAC).await?;
            self.start_extender(layout, running).await?;
        }
        if self.with_remediation {
            grant_rbac(client, "the remediation controller", rbac::REMEDIATE_RBAC).await?;
            self.start_remediation(layout, metrics, running).await?;
        }
        Ok(())
    }

    async fn start_extender(&self, layout: &Layout, running: &mut Running) -> Result<()> {
        let p = Progress;
        p.step("starting the scheduler extender");
        running.start(
            "scheduler-extender",
            layout,
            vec![
                "scheduler-extender".into(),
                "--kubeconfig".into(),
                layout.extender_kubeconfig().display().to_string(),
                "--listen".into(),
                self.extender_listen.clone(),
            ],
        )?;
        let addr = self.extender_listen.clone();
        until_ready(running, "the scheduler extender", async || {
            tokio::net::TcpStream::connect(addr.as_str()).await.ok()
        })
        .await?;
        p.done(&format!("ok (http://{}/filter)", self.extender_listen));
        Ok(())
    }

    async fn start_remediation(
        &self,
        layout: &Layout,
        metrics: &MetricsPorts,
        running: &mut Running,
    ) -> Result<()> {
        let p = Progress;
        let policy = match &self.remediation_policy {
            Some(file) => file.clone(),
            None => {
                let file = layout.root().join("remediate").join("policy.yaml");
                std::fs::write(&file, rbac::DEFAULT_REMEDIATION_POLICY)
                    .with_context(|| format!("writing {}", file.display()))?;
                file
            }
        };
        p.step(&format!(
            "starting the remediation controller ({})",
            if self.remediation_dry_run {
                "dry run"
            } else {
                "acting"
            }
        ));
        running.start(
            "remediate",
            layout,
            vec![
                "remediate".into(),
                "--kubeconfig".into(),
                layout.remediate_kubeconfig().display().to_string(),
                "--policy".into(),
                policy.display().to_string(),
                format!("--dry-run={}", self.remediation_dry_run),
                "--interval".into(),
                "1s".into(),
                "--http-endpoint".into(),
                metrics.http_endpoint("remediate")?,
            ],
        )?;
        p.done("ok");
        Ok(())
    }

    /// The summary lines of the components that were started.
    pub fn print_summary(&self) {
        if self.with_extender {
            println!(
                "  scheduler extender     http://{}/filter (metrics on /metrics)",
                self.extender_listen
            );
        }
    }
}
