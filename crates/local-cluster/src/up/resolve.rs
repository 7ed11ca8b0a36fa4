//! How commands address a running `up` the way users think of it: by `--dir`, by PVC and by node.

use super::layout::{Layout, RunRecord};
use crate::failure::Context as _;
use crate::failure::{Result, bail, ensure};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The reference driver's state dir of the `up` in `dir`, checking that `dir` is one and that
/// it runs the reference driver (an `up --driver-endpoint` runs yours, which `inject` cannot
/// reach: injecting there would change nothing and must not say it did).
pub fn state_dir(dir: &Path) -> Result<PathBuf> {
    let layout = Layout::new(dir)?;
    let record = RunRecord::load(&layout)?.with_context(|| {
        format!(
            "{} holds no `volhealth up` state (no up.json); start one with `volhealth up --dir {}`",
            dir.display(),
            dir.display()
        )
    })?;
    if let Some(endpoint) = &record.driver_endpoint {
        bail!(
            "the `volhealth up` in {} runs your driver {} at {endpoint} (--driver-endpoint), not the reference driver; `inject` changes only the reference driver's state, so it would change nothing here. Make the fault in your driver's own way, or run `up` without --driver-endpoint",
            dir.display(),
            record.driver
        );
    }
    Ok(layout.driver_state())
}

/// Checks that `node` is one of the `up`'s nodes.
pub fn check_node(dir: &Path, node: &str) -> Result<()> {
    let layout = Layout::new(dir)?;
    let record = RunRecord::load(&layout)?
        .with_context(|| format!("{} holds no `volhealth up` state", dir.display()))?;
    ensure!(
        record.nodes.iter().any(|n| n == node),
        "{node} is not a node of this cluster; its nodes are {}",
        record.nodes.join(", ")
    );
    Ok(())
}

/// Splits `NAMESPACE/NAME` (a bare `NAME` means namespace `default`).
pub fn split_claim(target: &str) -> Result<(String, String)> {
    let (ns, name) = target.split_once('/').unwrap_or(("default", target));
    ensure!(
        !ns.is_empty() && !name.is_empty() && !name.contains('/'),
        "expected NAMESPACE/NAME, got {target:?}"
    );
    Ok((ns.to_string(), name.to_string()))
}

/// The CSI volume handle behind a PVC: PVC → spec.volumeName → PV → spec.csi.volumeHandle,
/// read through `<dir>/kubeconfig`.
pub async fn volume_handle(dir: &Path, target: &str) -> Result<String> {
    let (ns, name) = split_claim(target)?;
    let layout = Layout::new(dir)?;
    let kubeconfig = layout.kubeconfig();
    ensure!(
        kubeconfig.exists(),
        "{} does not exist; is `volhealth up --dir {}` running?",
        kubeconfig.display(),
        dir.display()
    );
    let conn = crate::connection::connect(Some(&kubeconfig), Duration::from_secs(10)).await?;
    let pvc = Api::<PersistentVolumeClaim>::namespaced(conn.client.clone(), &ns)
        .get(&name)
        .await
        .map_err(|e| {
            crate::connection::explain(
                &e,
                &format!("reading PersistentVolumeClaim {ns}/{name}"),
                &conn,
            )
        })?;
    let pv_name = pvc
        .spec
        .and_then(|s| s.volume_name)
        .filter(|v| !v.is_empty())
        .with_context(|| format!("PersistentVolumeClaim {ns}/{name} is not bound to a volume"))?;
    let pv = Api::<PersistentVolume>::all(conn.client.clone())
        .get(&pv_name)
        .await
        .map_err(|e| {
            crate::connection::explain(&e, &format!("reading PersistentVolume {pv_name}"), &conn)
        })?;
    pv.spec
        .and_then(|s| s.csi)
        .map(|c| c.volume_handle)
        .with_context(|| format!("PersistentVolume {pv_name} (of {ns}/{name}) is not a CSI volume"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_namespace_slash_name() {
        assert_eq!(
            split_claim("default/data-1").unwrap(),
            ("default".into(), "data-1".into())
        );
        assert_eq!(
            split_claim("data-1").unwrap(),
            ("default".into(), "data-1".into())
        );
        for bad in ["/x", "ns/", "a/b/c", ""] {
            assert!(split_claim(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_dir_without_up_state_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = state_dir(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("no `volhealth up` state"), "{err}");
    }
}
