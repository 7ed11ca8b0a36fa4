//! A world for the monitor's tests that need the whole path: the embedded API server, the
//! reference driver in controller mode and monitors, all in this process, each on its own
//! thread and runtime, talking over real HTTP and a real unix socket; plus helpers to bind
//! volumes to claims, inject conditions and read both sides' metrics.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test support fails by panicking

use volhealth_driver::condition::volume_status;
use volhealth_driver::injection::Side;
use volhealth_driver::{HealthCapabilities, Mode};
use volhealth_testkit::{
    ApiServer, Claims, Driver, MetricsPage, Service, claim_status_patches, free_addr, http_text,
    monitor_config, run_monitor, start_apiserver, wait_for,
};

pub use volhealth_testkit::{DRIVER, NS, WAIT};

/// API server + driver; monitors are started separately.
pub struct World {
    /// Holds the server's data and the driver's socket and state.
    pub dir: tempfile::TempDir,
    /// The API server (plain HTTP, every client allowed).
    pub api: ApiServer,
    /// The claims on the driver's volumes, and an admin client (`admin`).
    pub claims: Claims,
    /// The driver.
    pub driver: Driver,
}

/// A running monitor; dropping it stops it.
pub struct Monitor {
    /// The monitor's run.
    pub service: Service,
    /// Its `/metrics` page.
    pub page: MetricsPage,
}

/// The CSI number of a volume condition's status, as `volhealth inject --status` takes it.
fn status_number(status: &str) -> i32 {
    match status {
        "Degraded" => volume_status::DEGRADED,
        "Inaccessible" => volume_status::INACCESSIBLE,
        "DataLoss" => volume_status::DATA_LOSS,
        other => panic!("no volume status {other}"),
    }
}

impl World {
    /// Starts the API server and the driver in controller mode advertising `caps` (as
    /// `--health-capabilities`, e.g. "list,get" or "get").
    pub async fn start(caps: &str) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let api = start_apiserver(dir.path(), &[]);
        let health = HealthCapabilities::parse(caps).expect("health capabilities");
        let driver = Driver::start_configured(dir.path(), DRIVER, "node-a", |c| {
            c.mode = Mode::Controller;
            c.health = health;
        })
        .await;
        let claims = Claims::connect(&api.kubeconfig, DRIVER, &driver.endpoint, NS, WAIT).await;
        World {
            dir,
            api,
            claims,
            driver,
        }
    }

    /// Injects a controller-side condition on a volume.
    pub fn inject_condition(&self, volume: &str, status: &str, reason: &str) {
        self.driver.inject_volume_message(
            volume,
            Side::Controller,
            status_number(status),
            reason,
            "injected by test",
        );
    }

    /// Injects a controller-side condition on `volume` and waits until `claim`, its claim,
    /// holds exactly that condition.
    pub async fn inject_and_wait(&self, volume: &str, claim: &str, status: &str, reason: &str) {
        self.inject_condition(volume, status, reason);
        self.wait_conditions(claim, &[(status, reason)]).await;
    }

    /// Clears a volume's injected conditions.
    pub fn clear_condition(&self, volume: &str) {
        self.driver.clear_volume(volume);
    }

    /// PATCHes of PVC status the API server has answered.
    pub async fn status_patches(&self) -> f64 {
        claim_status_patches(&self.api.url).await
    }

    /// Starts a monitor named `name` (at a 1 s interval, 5 s per RPC, as the end-to-end tests
    /// run `volhealth monitor`), waits for its /readyz.
    pub async fn start_monitor(&self, name: &str) -> Monitor {
        let address = free_addr();
        let config = monitor_config(
            &self.driver.endpoint,
            self.api.kubeconfig.clone(),
            Some(address),
        );
        let service = run_monitor(name, config);
        let ready = format!("http://{address}/readyz");
        wait_for(WAIT, &format!("{name} to be ready"), || async {
            assert!(!service.ended(), "{name} ended before it was ready");
            http_text(&ready).await.map(|_| ())
        })
        .await;
        Monitor {
            service,
            page: MetricsPage {
                metrics_url: format!("http://{address}/metrics"),
                timeout: WAIT,
            },
        }
    }
}

/// The claims: `bound_claim`, `conditions`, `wait_conditions`, `wait_event`, `admin`.
impl std::ops::Deref for World {
    type Target = Claims;
    fn deref(&self) -> &Claims {
        &self.claims
    }
}

impl Monitor {
    /// Stops the monitor through its shutdown future; it must end cleanly.
    pub fn stop(self) {
        self.service
            .stop()
            .expect("the monitor returns Ok once its shutdown future completes");
    }
}

/// The monitor's metrics page: `metrics`, `metric`, `wait_metrics`, `wait_probes`.
impl std::ops::Deref for Monitor {
    type Target = MetricsPage;
    fn deref(&self) -> &MetricsPage {
        &self.page
    }
}
