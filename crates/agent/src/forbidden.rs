//! The first status write refused because the agent's credentials are for another node: noted
//! by the write loop, waited for by the agent, which stops on it.

use crate::cluster::ApiFailure;
use std::sync::Mutex;
use tokio::sync::Notify;

/// The first refusal that means the agent's credentials are for another node: what was refused,
/// and the API server's answer. The agent stops on it.
#[derive(Debug, Default)]
pub struct Forbidden {
    first: Mutex<Option<(String, ApiFailure)>>,
    notify: Notify,
}

impl Forbidden {
    /// Notes that `what` was forbidden (the first note stands).
    pub fn note(&self, what: String, failure: &ApiFailure) {
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some((what, failure.clone()));
        }
        drop(first);
        self.notify.notify_one();
    }

    /// The refusal, if one was noted.
    pub fn get(&self) -> Option<(String, ApiFailure)> {
        self.first.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits for a refusal.
    pub async fn wait(&self) -> (String, ApiFailure) {
        loop {
            let notified = self.notify.notified();
            if let Some(f) = self.get() {
                return f;
            }
            notified.await;
        }
    }
}
