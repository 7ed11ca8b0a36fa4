//! The RBAC `up` grants: the monitor's service account, roles and bindings exactly as shipped in
//! `deploy/kubernetes/monitor/rbac.yaml` (the file is compiled in, so what `up` runs with is what
//! a cluster gets), applied server-side before the monitor starts. The API server runs with
//! `--authorization-mode Node,RBAC`: the agents are nodes (the Node authorizer scopes them), the
//! admin is in `system:masters`, and the monitor may do what that file grants and nothing more.

use crate::failure::Context as _;
use crate::failure::{Result, bail};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams};
use serde::de::DeserializeOwned;

/// The monitor's RBAC as shipped.
pub const MONITOR_RBAC: &str = include_str!("../../../../deploy/kubernetes/monitor/rbac.yaml");

/// The remediation controller's RBAC as shipped.
pub const REMEDIATE_RBAC: &str = include_str!("../../../../deploy/kubernetes/remediate/rbac.yaml");

/// The scheduler extender's RBAC as shipped.
pub const EXTENDER_RBAC: &str =
    include_str!("../../../../deploy/kubernetes/scheduler-extender/rbac.yaml");

/// The Story 5 policy `up --with-remediation` runs when no --remediation-policy is given.
pub const DEFAULT_REMEDIATION_POLICY: &str =
    include_str!("../../../../deploy/kubernetes/remediate/policy.yaml");

/// The authorizers `up` asks, in kube-apiserver's flag syntax.
pub const AUTHORIZATION_MODE: &str = "Node,RBAC";

const FIELD_MANAGER: &str = "volhealth-up";

async fn apply<K>(api: Api<K>, doc: serde_json::Value, name: &str, kind: &str) -> Result<()>
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(doc))
        .await
        .with_context(|| format!("applying the {kind} {name}"))?;
    Ok(())
}

/// Applies every object of `yaml` (ServiceAccounts, Roles, ClusterRoles and their bindings).
pub async fn apply_all(client: &kube::Client, yaml: &str) -> Result<usize> {
    let mut applied = 0;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(yaml).context("reading the shipped RBAC")?;
    for value in docs {
        if value.is_null() {
            continue;
        }
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let name = value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ns = value["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let c = client.clone();
        match kind.as_str() {
            "ServiceAccount" => {
                apply(
                    Api::<ServiceAccount>::namespaced(c, &ns),
                    value,
                    &name,
                    &kind,
                )
                .await?
            }
            "Role" => apply(Api::<Role>::namespaced(c, &ns), value, &name, &kind).await?,
            "RoleBinding" => {
                apply(Api::<RoleBinding>::namespaced(c, &ns), value, &name, &kind).await?
            }
            "ClusterRole" => apply(Api::<ClusterRole>::all(c), value, &name, &kind).await?,
            "ClusterRoleBinding" => {
                apply(Api::<ClusterRoleBinding>::all(c), value, &name, &kind).await?
            }
            other => bail!("the shipped RBAC holds a {other}, which up does not apply"),
        }
        applied += 1;
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_monitor_rbac_names_the_identity_up_gives_the_monitor() {
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(MONITOR_RBAC).unwrap();
        let sa = docs
            .iter()
            .find(|d| d["kind"] == "ServiceAccount")
            .expect("a ServiceAccount");
        let user = format!(
            "system:serviceaccount:{}:{}",
            sa["metadata"]["namespace"].as_str().unwrap(),
            sa["metadata"]["name"].as_str().unwrap()
        );
        assert_eq!(user, super::super::layout::MONITOR_USER);
        assert!(docs.iter().any(|d| d["kind"] == "ClusterRoleBinding"));
    }
}
