//! A server running on its own thread and runtime until its shutdown future completes.

use crate::captured_log::CapturedLog;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

thread_local! {
    /// The log of the service whose runtime this thread belongs to, if it has one.
    static THREAD_LOG: std::cell::Cell<Option<tracing::dispatcher::DefaultGuard>> =
        const { std::cell::Cell::new(None) };
}

/// How long a stopping service may take before its runtime is dropped under it.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The future a service is given: it completes when the service is asked to stop.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What a service's future may end with.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Why a service ended badly.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Its runtime could not be built.
    #[error("building the runtime of {service}: {source}")]
    Runtime {
        /// The service.
        service: String,
        /// Why.
        source: std::io::Error,
    },
    /// Its future ended with an error.
    #[error("{service}: {source}")]
    Failed {
        /// The service.
        service: String,
        /// The error.
        source: Failure,
    },
    /// Its thread panicked.
    #[error("{0} panicked")]
    Panicked(String),
}

/// A running service; dropping it stops it and waits for its thread.
pub struct Service {
    name: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    kill: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServiceError>>>,
}

impl Service {
    /// Runs `start(shutdown)` on a new thread with a two-worker runtime. `start` returns the
    /// service's future, which must end once `shutdown` completes.
    pub fn start<F, Fut, E>(name: &str, start: F) -> Service
    where
        F: FnOnce(Shutdown) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>>,
        E: Into<Failure>,
    {
        Self::start_maybe_logged(name, None, start)
    }

    /// Like [`Service::start`], with everything the service logs, on any thread of its runtime,
    /// going to `log`.
    pub fn start_logged<F, Fut, E>(name: &str, log: &CapturedLog, start: F) -> Service
    where
        F: FnOnce(Shutdown) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>>,
        E: Into<Failure>,
    {
        Self::start_maybe_logged(name, Some(log), start)
    }

    /// [`Service::start_logged`] when `log` is given, else [`Service::start`].
    pub(crate) fn start_maybe_logged<F, Fut, E>(
        name: &str,
        log: Option<&CapturedLog>,
        start: F,
    ) -> Service
    where
        F: FnOnce(Shutdown) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>>,
        E: Into<Failure>,
    {
        let log = log.map(CapturedLog::dispatch);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        let label = name.to_string();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let _log = log.as_ref().map(tracing::dispatcher::set_default);
                let on_start = log.clone();
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .on_thread_start(move || {
                        if let Some(log) = &on_start {
                            THREAD_LOG.set(Some(tracing::dispatcher::set_default(log)));
                        }
                    })
                    .on_thread_stop(|| THREAD_LOG.set(None))
                    .build()
                    .map_err(|source| ServiceError::Runtime {
                        service: label.clone(),
                        source,
                    })?;
                let shutdown: Shutdown = Box::pin(async move {
                    let _ = stopped.await;
                });
                let run = start(shutdown);
                let result = rt.block_on(async move {
                    tokio::select! {
                        result = run => Some(result),
                        Ok(()) = killed => None,
                    }
                });
                let Some(result) = result else {
                    // Killed: its tasks are dropped where they stand, none runs again.
                    rt.shutdown_background();
                    return Ok(());
                };
                rt.shutdown_timeout(STOP_GRACE);
                result.map_err(|e| ServiceError::Failed {
                    service: label,
                    source: e.into(),
                })
            })
            .expect("spawning a service thread");
        Service {
            name: name.to_string(),
            stop: Some(stop),
            kill: Some(kill),
            thread: Some(thread),
        }
    }

    /// Asks the service to stop and returns what its future returned; panics if it does not
    /// stop within the grace period (a shutdown future that is not honoured is a bug).
    pub fn stop(mut self) -> Result<(), ServiceError> {
        self.shutdown()
    }

    /// Ends the service as a crash of its process would: its future and every task of its
    /// runtime are dropped without the shutdown future completing, so none of its stopping code
    /// (releasing a Lease, say) runs. `Err` only when its thread panicked.
    pub fn kill(mut self) -> Result<(), ServiceError> {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        // The stop sender stays alive until the thread is gone: dropping it would complete the
        // shutdown future.
        self.join()
    }

    /// Whether the service's future has already ended (by itself, without being stopped).
    pub fn ended(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    fn shutdown(&mut self) -> Result<(), ServiceError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.join()
    }

    /// Waits (at most the grace period) for the service's thread to end and returns its result.
    fn join(&mut self) -> Result<(), ServiceError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        let deadline = std::time::Instant::now() + STOP_GRACE;
        while !thread.is_finished() {
            if std::time::Instant::now() > deadline {
                panic!("{} did not stop within {STOP_GRACE:?}", self.name);
            }
            std::thread::park_timeout(Duration::from_millis(20));
        }
        thread
            .join()
            .unwrap_or_else(|_| Err(ServiceError::Panicked(self.name.clone())))
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.thread.is_some() && !std::thread::panicking() {
            if let Err(e) = self.shutdown() {
                eprintln!("{} ended with an error: {e}", self.name);
            }
        } else if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
