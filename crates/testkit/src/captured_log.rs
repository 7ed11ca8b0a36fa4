//! A component's log caught in memory: a [`Service`](crate::Service) started with one collects
//! the `tracing` output of every thread of its runtime, as the process's standard error would.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// The log lines of one service (text format, no colour), filtered as `RUST_LOG` would filter them.
#[derive(Clone)]
pub struct CapturedLog {
    bytes: Arc<Mutex<Vec<u8>>>,
    filter: String,
}

impl CapturedLog {
    /// An empty log keeping what `filter` (a `RUST_LOG` directive, e.g.
    /// `info,volhealth_monitor=debug`) lets through.
    pub fn new(filter: &str) -> CapturedLog {
        CapturedLog {
            bytes: Arc::default(),
            filter: filter.to_string(),
        }
    }

    /// What has been logged so far.
    pub fn text(&self) -> String {
        let bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// A subscriber writing into this log.
    pub(crate) fn dispatch(&self) -> tracing::Dispatch {
        let filter = EnvFilter::try_new(&self.filter)
            .unwrap_or_else(|e| panic!("log filter {:?}: {e}", self.filter));
        tracing::Dispatch::new(
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_ansi(false)
                .with_writer(self.clone())
                .finish(),
        )
    }
}

/// One write into a [`CapturedLog`].
pub struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for CapturedLog {
    type Writer = LogWriter;
    fn make_writer(&'a self) -> LogWriter {
        LogWriter(self.bytes.clone())
    }
}
