//! What several of testkit's own tests share: a loopback address for a writer's HTTP endpoint,
//! and waiting for a writer to finish more probe cycles (read from its metrics) instead of
//! sleeping, when a test must show that something did *not* change.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test support fails by panicking

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::Api;
use std::net::SocketAddr;
use std::time::Duration;

/// A free loopback address for a writer's HTTP endpoint.
pub fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// Probe cycles the writer serving metrics on `addr` has finished (0 while it does not answer).
pub async fn cycles(addr: SocketAddr) -> f64 {
    let Ok(resp) = reqwest::get(format!("http://{addr}/metrics")).await else {
        return 0.0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("csi_volume_health_cycle_duration_seconds_count"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until every writer in `addrs` has finished `n` more probe cycles than it had when this
/// was called (each cycle asks the driver about every volume once).
pub async fn more_cycles(addrs: &[SocketAddr], n: f64) {
    let mut start = Vec::new();
    for a in addrs {
        start.push(cycles(*a).await);
    }
    volhealth_testkit::wait_for(Duration::from_secs(40), "more probe cycles", || async {
        for (a, s) in addrs.iter().zip(&start) {
            if cycles(*a).await < s + n {
                return None;
            }
        }
        Some(())
    })
    .await
}

/// (status, reason, message) of each condition.
pub type Seen = Vec<(String, String, String)>;

/// The conditions on claim `default/claim-web` of a [`volhealth_testkit::NodeWorld`], and its
/// resourceVersion.
pub async fn claim(admin: &kube::Client) -> Option<(Seen, String)> {
    let pvc = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "default")
        .get("claim-web")
        .await
        .ok()?;
    let rv = pvc.metadata.resource_version.clone().unwrap_or_default();
    let seen = pvc
        .status
        .and_then(|s| s.health_status)
        .and_then(|h| h.health_conditions)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.status, c.reason, c.message.unwrap_or_default()))
        .collect();
    Some((seen, rv))
}

/// The conditions of pod `default/web`'s volumes.
pub async fn pod(admin: &kube::Client) -> Option<Seen> {
    let pod = Api::<Pod>::namespaced(admin.clone(), "default")
        .get("web")
        .await
        .ok()?;
    Some(
        pod.status
            .and_then(|s| s.volume_health)
            .unwrap_or_default()
            .into_iter()
            .flat_map(|e| e.health_conditions.unwrap_or_default())
            .map(|c| (c.status, c.reason, c.message.unwrap_or_default()))
            .collect(),
    )
}
