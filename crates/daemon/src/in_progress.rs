//! What a component is waiting for right now, cheaply kept so that a shutdown cut off by the
//! watchdog (see [`crate::shutdown_signal`]) can name it.
//!
//! Work is marked with [`in_progress`] as it starts and unmarked when its guard drops. Servers
//! mark each request with [`crate::in_progress_layer::InProgressLayer`]; Kubernetes client
//! requests are marked from kube's own tracing spans by [`crate::kube_requests`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);
static IN_PROGRESS: Mutex<BTreeMap<u64, String>> = Mutex::new(BTreeMap::new());
static RUN_LOOP: Mutex<Option<String>> = Mutex::new(None);

/// How many pending things [`describe`] names before it only counts the rest.
const MOST_NAMED: usize = 10;

/// Marks `what` as in progress until the guard is dropped, so a cut-off shutdown can name it.
///
/// Logs `waiting for: WHAT` at trace level (target `volhealth_daemon::in_progress`).
pub fn in_progress(what: impl Into<String>) -> InProgress {
    let what = what.into();
    tracing::trace!("waiting for: {what}");
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut m) = IN_PROGRESS.lock() {
        m.insert(id, what);
    }
    InProgress(id)
}

/// Guard of [`in_progress`].
#[derive(Debug)]
pub struct InProgress(u64);

impl Drop for InProgress {
    fn drop(&mut self) {
        if let Ok(mut m) = IN_PROGRESS.lock() {
            m.remove(&self.0);
        }
    }
}

/// What is in progress now, in start order.
pub fn pending() -> Vec<String> {
    IN_PROGRESS
        .lock()
        .map(|m| m.values().cloned().collect())
        .unwrap_or_default()
}

/// Names the component's run loop, what a cut-off shutdown names when nothing more specific is
/// in progress (e.g. `the node agent of node n1`).
pub fn name_run_loop(what: impl Into<String>) {
    if let Ok(mut name) = RUN_LOOP.lock() {
        *name = Some(what.into());
    }
}

/// What the watchdog names: what is in progress, else the run loop as [`name_run_loop`] named it.
pub fn describe() -> String {
    let pending = pending();
    if !pending.is_empty() {
        let mut named = pending
            .iter()
            .take(MOST_NAMED)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if pending.len() > MOST_NAMED {
            named.push_str(&format!(" and {} more", pending.len() - MOST_NAMED));
        }
        return named;
    }
    let named = RUN_LOOP.lock().ok().and_then(|n| n.clone());
    match named {
        Some(name) => format!("{name} to finish (nothing more specific in progress)"),
        None => "the run loop to finish".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_progress_is_listed_until_dropped() {
        let a = in_progress("CSI call ControllerListVolumes");
        let b = in_progress("watch of pods");
        assert!(pending().contains(&"CSI call ControllerListVolumes".to_string()));
        assert!(describe().contains("watch of pods"), "{}", describe());
        drop(a);
        let now = pending();
        assert!(!now.contains(&"CSI call ControllerListVolumes".to_string()));
        assert!(now.contains(&"watch of pods".to_string()));
        drop(b);
    }
}
