//! A world for the monitor's tests that need the whole path: the embedded API server, the
//! reference driver in controller mode and monitors, all in this process, each on its own
//! thread and runtime with its log caught in memory, talking over real HTTP and a real unix
//! socket; plus helpers to bind volumes to claims, inject conditions and faults, and read both
//! sides' metrics.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test support fails by panicking

use std::sync::{Mutex, PoisonError};
use volhealth_driver::injection::{self, Injections, RpcFault, Side};
use volhealth_driver::{DriverConfig, HealthCapabilities, Mode};
use volhealth_monitor::MonitorConfig;
use volhealth_testkit::{
    ApiServer, CapturedLog, Claims, Driver, MetricsPage, Service, claim_status_patches, free_addr,
    http_text, monitor_config, run_monitor_logged, start_apiserver_logged, wait_for,
};

pub use volhealth_testkit::{DRIVER, NS, WAIT};

/// The log filter of the monitors (`RUST_LOG`): their own debug lines too.
const MONITOR_LOG: &str = "info,volhealth_monitor=debug";
/// The log filter of the API server and the driver, as their processes log by default.
const COMPONENT_LOG: &str = "info";

/// API server + driver; monitors are started separately.
pub struct World {
    /// Holds the server's data and the driver's socket and state.
    pub dir: tempfile::TempDir,
    /// The API server (plain HTTP, every client allowed).
    pub api: ApiServer,
    /// What the API server logged.
    pub api_log: CapturedLog,
    /// The claims on the driver's volumes, and an admin client (`admin`).
    pub claims: Claims,
    /// The driver.
    pub driver: Driver,
    /// What the driver logged.
    pub driver_log: CapturedLog,
    /// What each monitor started in this world logged, by name.
    monitor_logs: Mutex<Vec<(String, CapturedLog)>>,
}

/// A running monitor; dropping it stops it.
pub struct Monitor {
    /// The monitor's run.
    pub service: Service,
    /// Its `/metrics` page.
    pub page: MetricsPage,
    /// What it logged.
    pub log: CapturedLog,
}

impl World {
    /// Starts the API server and the driver in controller mode advertising `caps` (as
    /// `--health-capabilities`, e.g. "list,get" or "get").
    pub async fn start(caps: &str) -> World {
        Self::start_with(caps, &[], |_| {}).await
    }

    /// [`World::start`] with `apiserver_flags` given to the API server (see
    /// `volhealth_testkit::config_from_flags`) and `configure` applied to the driver's
    /// configuration last.
    pub async fn start_with(
        caps: &str,
        apiserver_flags: &[&str],
        configure: impl FnOnce(&mut DriverConfig),
    ) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let api_log = CapturedLog::new(COMPONENT_LOG);
        let api = start_apiserver_logged(dir.path(), apiserver_flags, &api_log);
        let health = HealthCapabilities::parse(caps).expect("health capabilities");
        let driver_log = CapturedLog::new(COMPONENT_LOG);
        let driver =
            Driver::start_configured_logged(dir.path(), DRIVER, "node-a", &driver_log, |c| {
                c.mode = Mode::Controller;
                c.health = health;
                configure(c);
            })
            .await;
        let claims = Claims::connect(&api.kubeconfig, DRIVER, &driver.endpoint, NS, WAIT).await;
        World {
            dir,
            api,
            api_log,
            claims,
            driver,
            driver_log,
            monitor_logs: Mutex::default(),
        }
    }

    /// Injects a controller-side condition on a volume; `status` is a name (`Degraded`) or a
    /// raw CSI number, as `volhealth inject --status` takes it.
    pub fn inject_condition(&self, volume: &str, status: &str, reason: &str) {
        let number = injection::parse_volume_status(status).expect("a volume status");
        self.driver.inject_volume_message(
            volume,
            Side::Controller,
            number,
            reason,
            "injected by test",
        );
    }

    /// Changes what the driver has injected (RPC faults, list chaos, ...).
    pub fn inject(&self, change: impl FnOnce(&mut Injections)) {
        self.driver.update_injections(change);
    }

    /// Makes every call of `method` fail with gRPC `code` (a name or number), with `message`
    /// in place of the default when given.
    pub fn fail_rpc(&self, method: &str, code: &str, message: Option<&str>) {
        let code = injection::parse_grpc_code(code).expect("a gRPC code");
        self.inject(|i| {
            i.set_fault(RpcFault {
                method: method.to_string(),
                code,
                rate: 1.0,
                delay_ms: 0,
                message: message.map(str::to_string),
            })
        });
    }

    /// Removes the injected faults of `method`.
    pub fn clear_rpc(&self, method: &str) {
        self.inject(|i| i.rpc.retain(|f| f.method != method));
    }

    /// Ends the driver as `kill -9` would end its process; injections still reach its state dir.
    pub fn kill_driver(&mut self) {
        self.driver.kill();
    }

    /// Starts the driver again on the same socket and state dir.
    pub async fn start_driver(&mut self) {
        self.driver.restart().await;
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

    /// What each component of this world has logged so far, by name: the API server, the
    /// driver (across its restarts) and every monitor started in it.
    pub fn logs(&self) -> Vec<(String, String)> {
        let monitors = self
            .monitor_logs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let components = [("apiserver", &self.api_log), ("driver", &self.driver_log)];
        components
            .into_iter()
            .chain(monitors.iter().map(|(name, log)| (name.as_str(), log)))
            .map(|(name, log)| (name.to_string(), log.text()))
            .collect()
    }

    /// Starts a monitor named `name` (at a 1 s interval, 5 s per RPC, as the end-to-end tests
    /// run `volhealth monitor`), waits for its /readyz.
    pub async fn start_monitor(&self, name: &str) -> Monitor {
        self.start_monitor_with(name, |_| {}).await
    }

    /// [`World::start_monitor`] with `configure` applied to the monitor's configuration last.
    pub async fn start_monitor_with(
        &self,
        name: &str,
        configure: impl FnOnce(&mut MonitorConfig),
    ) -> Monitor {
        let monitor = self.spawn_monitor(name, configure);
        let ready = monitor.metrics_url.replace("/metrics", "/readyz");
        wait_for(WAIT, &format!("{name} to be ready"), || async {
            assert!(
                !monitor.service.ended(),
                "{name} ended before it was ready:\n{}",
                monitor.log.text()
            );
            http_text(&ready).await.map(|_| ())
        })
        .await;
        monitor
    }

    /// Starts a monitor like [`World::start_monitor_with`], without waiting for anything.
    pub fn spawn_monitor(&self, name: &str, configure: impl FnOnce(&mut MonitorConfig)) -> Monitor {
        let address = free_addr();
        let mut config = monitor_config(
            &self.driver.endpoint,
            self.api.kubeconfig.clone(),
            Some(address),
        );
        configure(&mut config);
        let log = CapturedLog::new(MONITOR_LOG);
        self.monitor_logs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name.to_string(), log.clone()));
        Monitor {
            service: run_monitor_logged(name, config, &log),
            page: MetricsPage {
                metrics_url: format!("http://{address}/metrics"),
                timeout: WAIT,
            },
            log,
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

impl Drop for World {
    fn drop(&mut self) {
        // The logs live only in memory: show what each component said last when a test fails.
        if !std::thread::panicking() {
            return;
        }
        for (name, text) in self.logs() {
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!(
                "--- last {} lines of {name} ---\n{}",
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// The monitor's metrics page: `metrics`, `metric`, `wait_metrics`, `wait_probes`.
impl std::ops::Deref for Monitor {
    type Target = MetricsPage;
    fn deref(&self) -> &MetricsPage {
        &self.page
    }
}
