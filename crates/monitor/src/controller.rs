//! Wiring: HTTP endpoint, driver connection and capability probe, caches, leader election, the
//! writer and the probe cycles, all stopped by one shutdown future.

use crate::config::{MonitorConfig, lease_name};
use crate::coverage::{self, KubeDriverObject, Publisher};
use crate::csi_source::{CsiCapabilities, CsiHealthSource, LegacySlot, Secrets};
use crate::engine::{CapabilitySource, DriverInfo, Engine, EngineSettings, Mode, Shared};
use crate::http::{HealthFlags, endpoints};
use crate::kube_claims::KubeClaims;
use crate::kube_patcher::KubePatcher;
use crate::{Error, Result, health_secret};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;
use volhealth_daemon::BoundEndpoint;
use volhealth_kube_access::{Backoff, leader};
use volhealth_writer::events::{EVENT_BURST, EVENT_QPS};
use volhealth_writer::intervals::{DriverIntervals, MONITOR_ANNOTATION};
use volhealth_writer::{KubeEventSink, MAX_WRITES_IN_FLIGHT, RateLimiter, SystemClock, WriteLoop};

/// The component name on Events.
pub const COMPONENT: &str = "volhealth-monitor";
/// How long a stopping monitor waits for its Lease to be released.
const RELEASE_WAIT: Duration = Duration::from_secs(3);
/// Longest wait between attempts to reach the driver at start.
const MAX_START_BACKOFF: Duration = Duration::from_secs(30);

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// Retries `attempt` with the shared jittered backoff (1 s doubling to
/// [`MAX_START_BACKOFF`]) until it succeeds or `stop` fires (then `None`).
async fn until_ok<T, E, F, Fut>(
    what: &str,
    stop: &mut watch::Receiver<bool>,
    mut attempt: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, E>>,
    E: std::fmt::Display,
{
    let mut backoff = Backoff::new(Duration::from_secs(1), MAX_START_BACKOFF);
    let _busy = volhealth_daemon::shutdown_signal::in_progress(what);
    loop {
        let wait = match attempt().await {
            Ok(v) => return Some(v),
            Err(e) => {
                let wait = backoff.next_delay();
                tracing::warn!(error = %e, retry_in = ?wait, "{what} failed");
                wait
            }
        };
        tokio::select! {
            _ = stop.wait_for(|v| *v) => return None,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

fn describe_mode(info: &DriverInfo) {
    for v in &info.violations {
        tracing::warn!(violation = %v, "driver breaks the CSI spec");
    }
    if info.legacy {
        let how = match info.mode {
            Mode::List { get: true } => {
                "ListVolumes, confirming recoveries with ControllerGetVolume"
            }
            Mode::List { get: false } => "ListVolumes",
            _ => "ControllerGetVolume per bound volume",
        };
        tracing::info!(driver = %info.driver_name, "the driver speaks only the legacy VOLUME_CONDITION shape; probing with {how} through the bridge (--legacy-volume-condition=off turns this off)");
        return;
    }
    match info.mode {
        Mode::List { get: true } => {
            tracing::info!(driver = %info.driver_name, "probing with ControllerListVolumeHealth, confirming recoveries with ControllerGetVolumeHealth")
        }
        Mode::List { get: false } => {
            tracing::warn!(driver = %info.driver_name, "the driver advertises LIST_VOLUME_HEALTH without GET_VOLUME_HEALTH, which the CSI spec requires; listing anyway, recoveries need two complete list cycles")
        }
        Mode::Get => {
            tracing::info!(driver = %info.driver_name, "probing each bound volume with ControllerGetVolumeHealth")
        }
        Mode::Annotation => {
            tracing::info!(driver = %info.driver_name, "the driver has no health RPC; reading each bound claim's {} annotation (--health-annotation)", crate::watched::HEALTH_ANNOTATION)
        }
        Mode::Off => {
            tracing::info!(driver = %info.driver_name, "the driver advertises no controller volume health capability; not probing (still serving metrics and health)")
        }
    }
}

/// Runs the monitor until `shutdown` completes.
pub async fn run(
    config: MonitorConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    config
        .validate()
        .map_err(|e| Error::Config(e.to_string()))?;
    let (stop_tx, mut stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let flags = Arc::new(HealthFlags::default());
    let loaded = volhealth_kube_access::client::load(config.kubeconfig.as_deref()).await?;
    let default_namespace = loaded.default_namespace.clone();
    let client = loaded.client;
    let claims = Arc::new(KubeClaims::start(client.clone()));
    let shared = Arc::new(Shared::new(
        claims.clone(),
        Arc::new(KubePatcher::new(client.clone())),
        Arc::new(SystemClock),
        config.monitor_interval,
    ));

    if let Some(addr) = config.http_endpoint {
        let bound = BoundEndpoint::bind(addr, endpoints(shared.clone(), flags.clone())).await?;
        tokio::spawn(bound.serve(stopped(stop_rx.clone())));
    }

    let timeout = config.timeout;
    let address = config.csi_address.clone();
    let Some(channel) = until_ok("connecting to the CSI driver", &mut stop_rx, || {
        let address = address.clone();
        async move {
            volhealth_csi::client::connect(&address, timeout)
                .await
                .map_err(|e| format!("{address}: {e}"))
        }
    })
    .await
    else {
        return Ok(());
    };
    let legacy_slot = LegacySlot::default();
    let caps = CsiCapabilities::new(channel.clone(), timeout)
        .with_legacy(config.legacy.clone(), legacy_slot.clone())
        .with_annotation(config.health_annotation);
    let Some(info) = until_ok("probing the driver's capabilities", &mut stop_rx, || {
        caps.probe()
    })
    .await
    else {
        return Ok(());
    };
    describe_mode(&info);
    // Published by every replica, leader or not: each reads first and writes only a change.
    let (probed_tx, probed_rx) = watch::channel(info.clone());
    tokio::spawn(coverage::run(
        Publisher::new(
            Arc::new(KubeDriverObject(client.clone())),
            &info.driver_name,
        ),
        probed_rx,
        stop_rx.clone(),
    ));

    let secrets = match &config.health_secret {
        Some(r) => {
            let secrets = health_secret::load(client.clone(), r).await?;
            health_secret::spawn_watch(client.clone(), r.clone(), secrets.clone(), stop_rx.clone());
            secrets
        }
        None => Secrets::default(),
    };
    let identity = config
        .leader_election
        .as_ref()
        .and_then(|le| le.identity.clone())
        .unwrap_or_else(|| leader::default_identity("volhealth-monitor"));
    // Without election the sender lives as long as the monitor, so the flag stays true.
    let (_always_tx, always_rx) = watch::channel(true);
    let mut election_done = None;
    let leader_rx = match &config.leader_election {
        None => always_rx,
        Some(le) => {
            let namespace = leader::namespace(le, &default_namespace);
            let name = lease_name(&info.driver_name);
            tracing::info!(lease = %name, %namespace, %identity, "leader election on");
            let Some(election) = until_ok("starting leader election", &mut stop_rx, || {
                let (client, namespace, name, identity) = (
                    client.clone(),
                    namespace.clone(),
                    name.clone(),
                    identity.clone(),
                );
                async move { leader::start(client, &namespace, &name, &identity, le).await }
            })
            .await
            else {
                return Ok(());
            };
            let live = flags.live.clone();
            let healthy = election.healthy.clone();
            let mut watch_stop = stop_rx.clone();
            tokio::spawn(async move {
                loop {
                    live.store(healthy.load(Ordering::Acquire), Ordering::Release);
                    tokio::select! {
                        _ = watch_stop.wait_for(|v| *v) => return,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            });
            election_done = Some(election.done);
            election.leader
        }
    };
    // Losing the lease drops everything not yet written: the new leader computes its own.
    {
        let mut rx = leader_rx.clone();
        let shared = shared.clone();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.wait_for(|v| *v) => return,
                    r = rx.changed() => if r.is_err() { return },
                }
                if !*rx.borrow() {
                    shared.offers.clear();
                    shared.events.clear();
                }
            }
        });
    }

    let writer = WriteLoop {
        offers: shared.offers.clone(),
        limiter: RateLimiter::new(config.kube_api_qps, config.kube_api_burst),
        leader: leader_rx.clone(),
        max_in_flight: MAX_WRITES_IN_FLIGHT,
    };
    tokio::spawn(writer.run(stopped(stop_rx.clone())));
    let sink = KubeEventSink::new(client.clone(), COMPONENT, identity.clone(), None);
    tokio::spawn(shared.events.clone().run(
        sink,
        RateLimiter::new(EVENT_QPS, EVENT_BURST),
        stopped(stop_rx.clone()),
    ));

    tokio::select! {
        _ = stop_rx.wait_for(|v| *v) => return Ok(()),
        synced = claims.wait_synced() => if !synced {
            return Err(Error::Config("the PV/PVC caches stopped before their first list".into()));
        },
    }
    flags.ready.store(true, Ordering::Release);
    tracing::info!("caches synced; monitoring");

    let settings = EngineSettings {
        driver_name: info.driver_name.clone(),
        interval: config.monitor_interval,
        timeout,
        page_size: i32::try_from(config.list_page_size).unwrap_or(i32::MAX),
        workers: config.worker_threads,
    };
    let source = Arc::new(CsiHealthSource::new(channel, secrets, legacy_slot));
    let intervals = Arc::new(DriverIntervals::new(
        MONITOR_ANNOTATION,
        config.monitor_interval,
    ));
    let _interval_watch =
        intervals.spawn_watch(kube::Api::all(client.clone()), Some(&info.driver_name));
    let engine = Engine::new(source, shared, settings, info.mode)
        .with_intervals(intervals)
        .with_probed(probed_tx);
    engine.run(&caps, leader_rx, stopped(stop_rx)).await;
    if let Some(done) = election_done {
        // Give the election a moment to release the Lease, so a successor starts at once.
        if tokio::time::timeout(RELEASE_WAIT, done).await.is_err() {
            tracing::warn!("the leader Lease was not released in time; it will expire");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn the_monitor_future_can_be_spawned() {
        let fut = run(MonitorConfig::default(), std::future::pending::<()>());
        assert_send(&fut);
    }

    #[tokio::test]
    async fn invalid_settings_are_refused_before_anything_starts() {
        let config = MonitorConfig {
            worker_threads: 0,
            ..Default::default()
        };
        let err = run(config, std::future::pending::<()>()).await.unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err}");
    }
}
