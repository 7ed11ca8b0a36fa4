//! What the monitor's tests read and write around a claim: a PV of a volume with a claim on it,
//! Pending or Bound as the PV controller leaves it; the claim's health conditions and Events;
//! and the samples of a metrics page.

use k8s_openapi::api::core::v1::{Event, Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

use crate::kube_client::client_for;
use crate::wait::wait_for;
use crate::world::create_volume;

/// The claims on volumes of one driver in one namespace, as the monitor's worlds make and read
/// them; waits end after `timeout`.
pub struct Claims {
    /// An admin client.
    pub admin: kube::Client,
    /// The driver's name, in the PVs.
    pub driver: String,
    /// The driver's CSI endpoint, for CreateVolume.
    pub endpoint: String,
    /// Namespace of the claims.
    pub namespace: String,
    /// Deadline of every wait.
    pub timeout: Duration,
}

impl Claims {
    /// Claims of `driver` (at `endpoint`) in `namespace`, as the admin of `kubeconfig`; creates
    /// the namespace when it is not there yet.
    pub async fn connect(
        kubeconfig: &Path,
        driver: &str,
        endpoint: &str,
        namespace: &str,
        timeout: Duration,
    ) -> Claims {
        let admin = client_for(kubeconfig).await;
        let _ = Api::<Namespace>::all(admin.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": namespace}}))
                    .expect("a namespace's JSON"),
            )
            .await;
        Claims {
            admin,
            driver: driver.to_string(),
            endpoint: endpoint.to_string(),
            namespace: namespace.to_string(),
            timeout,
        }
    }

    /// Creates a volume with the driver's CreateVolume; returns its id.
    pub async fn create_volume(&self, name: &str) -> String {
        create_volume(&self.endpoint, name, None).await
    }

    /// Creates a volume, its PV and a Bound claim `name`; returns the volume id.
    pub async fn bound_claim(&self, name: &str) -> String {
        let handle = self.pending_claim(name).await;
        self.mark_bound(name).await;
        handle
    }

    /// Creates a volume, PV `pv-<name>` of it (1Gi, reclaim policy Delete) and claim `name` on
    /// it, still Pending; returns the volume id.
    pub async fn pending_claim(&self, name: &str) -> String {
        let handle = self.create_volume(name).await;
        let pv = format!("pv-{name}");
        let obj: PersistentVolume =
            serde_json::from_value(json!({"metadata": {"name": pv}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "csi": {"driver": self.driver, "volumeHandle": handle},
            "claimRef": {"namespace": self.namespace, "name": name}}}))
            .expect("a PV's JSON");
        Api::<PersistentVolume>::all(self.admin.clone())
            .create(&PostParams::default(), &obj)
            .await
            .expect("create PV");
        let obj: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": pv}}))
        .expect("a claim's JSON");
        let pvcs = self.pvcs();
        pvcs.create(&PostParams::default(), &obj)
            .await
            .expect("create PVC");
        let pending = Patch::Merge(json!({"status": {"phase": "Pending"}}));
        pvcs.patch_status(name, &PatchParams::default(), &pending)
            .await
            .expect("mark PVC Pending");
        handle
    }

    fn pvcs(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.admin.clone(), &self.namespace)
    }

    /// Marks claim `name` and its PV `pv-<name>` Bound (what the PV controller would do).
    pub async fn mark_bound(&self, name: &str) {
        let bound = Patch::Merge(json!({"status": {"phase": "Bound"}}));
        self.pvcs()
            .patch_status(name, &PatchParams::default(), &bound)
            .await
            .expect("mark PVC Bound");
        Api::<PersistentVolume>::all(self.admin.clone())
            .patch_status(&format!("pv-{name}"), &PatchParams::default(), &bound)
            .await
            .expect("mark PV Bound");
    }

    /// The (status, reason) pairs stored on the claim.
    pub async fn conditions(&self, claim: &str) -> Vec<(String, String)> {
        let pvc = self.pvcs().get(claim).await.expect("get PVC");
        pvc.status
            .and_then(|s| s.health_status)
            .and_then(|h| h.health_conditions)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.status, c.reason))
            .collect()
    }

    /// Waits until the claim's conditions are exactly `want`.
    pub async fn wait_conditions(&self, claim: &str, want: &[(&str, &str)]) {
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(s, r)| (s.to_string(), r.to_string()))
            .collect();
        wait_for(
            self.timeout,
            &format!("{claim} to have conditions {want:?}"),
            || async { (self.conditions(claim).await == want).then_some(()) },
        )
        .await;
    }

    /// Reasons of the Events on a claim.
    pub async fn event_reasons(&self, claim: &str) -> Vec<String> {
        let events = Api::<Event>::namespaced(self.admin.clone(), &self.namespace)
            .list(&ListParams::default())
            .await
            .expect("list events");
        events
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(claim))
            .filter_map(|e| e.reason)
            .collect()
    }

    /// Waits until the claim has an Event with this reason (Events are written after the status
    /// patch, so they can trail the condition by a moment); returns the reasons of its Events.
    pub async fn wait_event(&self, claim: &str, reason: &str) -> Vec<String> {
        wait_for(
            self.timeout,
            &format!("a {reason} event on {claim}"),
            || async {
                let reasons = self.event_reasons(claim).await;
                reasons.iter().any(|r| r == reason).then_some(reasons)
            },
        )
        .await
    }
}

/// (volume, status, reason) of each volume health condition on pod `pod`'s status.
pub async fn pod_volume_conditions(pods: &Api<Pod>, pod: &str) -> Vec<(String, String, String)> {
    let p = pods.get(pod).await.expect("get the pod");
    p.status
        .and_then(|s| s.volume_health)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|e| {
            let name = e.name.clone();
            e.health_conditions
                .unwrap_or_default()
                .into_iter()
                .map(move |c| (name.clone(), c.status, c.reason))
        })
        .collect()
}

/// (status, reason) of the storage conditions node `node`'s CSINode holds for `driver` (none
/// while there is no CSINode).
pub async fn storage_conditions(
    admin: &kube::Client,
    node: &str,
    driver: &str,
) -> Vec<(String, String)> {
    let Ok(csinode) = Api::<CSINode>::all(admin.clone()).get(node).await else {
        return Vec::new();
    };
    csinode
        .status
        .and_then(|s| s.storage_health)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.name == driver)
        .flat_map(|e| e.health_conditions.unwrap_or_default())
        .map(|c| (c.status, c.reason))
        .collect()
}

/// GETs `url` and returns the body (None on any failure).
pub async fn http_text(url: &str) -> Option<String> {
    let resp = reqwest::get(url).await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.text().await.ok()
}

/// Sums every sample of `name` whose label text contains all of `labels`.
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// PATCHes of PVC status the API server at `url` has answered, from its own metrics.
pub async fn claim_status_patches(url: &str) -> f64 {
    let text = http_text(&format!("{url}/metrics"))
        .await
        .expect("API server /metrics");
    metric_sum(
        &text,
        "apiserver_request_total",
        &[
            r#"verb="PATCH""#,
            r#"resource="persistentvolumeclaims""#,
            r#"subresource="status""#,
        ],
    )
}

/// A component's `/metrics` page, read over HTTP.
pub struct MetricsPage {
    /// Its URL.
    pub metrics_url: String,
    /// Deadline of each wait on it.
    pub timeout: Duration,
}

impl MetricsPage {
    /// The metrics text (empty while the page does not answer).
    pub async fn metrics(&self) -> String {
        http_text(&self.metrics_url).await.unwrap_or_default()
    }

    /// Waits until the metrics text satisfies `ok` (metrics are updated right after the status
    /// patch is answered, so they can trail what the API server shows by a moment).
    pub async fn wait_metrics(&self, what: &str, ok: impl Fn(&str) -> bool) {
        wait_for(self.timeout, what, || async {
            let text = self.metrics().await;
            ok(&text).then_some(())
        })
        .await;
    }

    /// Sum of the samples of `name` matching `labels`.
    pub async fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        metric_sum(&self.metrics().await, name, labels)
    }

    /// Successful probe RPCs so far (list pages or gets).
    pub async fn successful_probes(&self) -> f64 {
        self.metric("csi_volume_health_probe_total", &[r#"result="success""#])
            .await
    }

    /// Waits until at least `n` more successful probes than now happened (i.e. cycles went by).
    pub async fn wait_probes(&self, n: f64) {
        let start = self.successful_probes().await;
        wait_for(
            self.timeout,
            &format!("{n} more successful probes"),
            || async { (self.successful_probes().await >= start + n).then_some(()) },
        )
        .await;
    }
}
