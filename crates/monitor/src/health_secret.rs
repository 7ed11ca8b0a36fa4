//! `--health-secret NAMESPACE/NAME`: the Secret whose data goes into the health RPCs' `secrets`,
//! read once at start (a missing Secret stops the monitor before any probe) and then watched,
//! so a rotated credential is used from the next call on without a restart. Values never
//! appear in logs or errors; only key names do.

use crate::config::SecretRef;
use crate::csi_source::Secrets;
use crate::{Error, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::HashMap;
use tokio::sync::watch;

/// The Secret's `data` and `stringData` as strings (`stringData` wins, as the API server merges).
fn data_of(secret: Secret, r: &SecretRef) -> Result<HashMap<String, String>> {
    let mut data = HashMap::new();
    for (k, v) in secret.data.unwrap_or_default() {
        // Never echo the value: only the key names which one is unusable.
        let v = String::from_utf8(v.0)
            .map_err(|_| Error::Config(format!("health secret {r}: key {k:?} is not UTF-8")))?;
        data.insert(k, v);
    }
    for (k, v) in secret.string_data.unwrap_or_default() {
        data.insert(k, v);
    }
    Ok(data)
}

/// Reads the Secret once.
pub async fn load(client: Client, r: &SecretRef) -> Result<Secrets> {
    let secret = Api::<Secret>::namespaced(client, &r.namespace)
        .get(&r.name)
        .await
        .map_err(|source| Error::Kube {
            what: format!("reading the health secret {r}"),
            source,
        })?;
    Ok(Secrets::new(data_of(secret, r)?))
}

/// Watches the Secret until `stop` turns true and puts each new version's data into `secrets`.
/// A deleted Secret, or a version that cannot be used, keeps the data last used (logged).
pub fn spawn_watch(
    client: Client,
    r: SecretRef,
    secrets: Secrets,
    mut stop: watch::Receiver<bool>,
) {
    let api = Api::<Secret>::namespaced(client, &r.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", r.name));
    tokio::spawn(async move {
        let mut events = Box::pin(watcher(api, config).default_backoff());
        loop {
            let event = tokio::select! {
                _ = stop.wait_for(|v| *v) => return,
                e = events.next() => e,
            };
            match event {
                None => return,
                Some(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) => {
                    match data_of(s, &r) {
                        Ok(data) => {
                            if secrets.replace(data) {
                                tracing::info!(secret = %r, "the health secret changed; its new data goes into the next health RPC");
                            }
                        }
                        Err(e) => {
                            tracing::warn!(secret = %r, error = %e, "the health secret's new version cannot be used; keeping the data last used")
                        }
                    }
                }
                Some(Ok(watcher::Event::Delete(_))) => {
                    tracing::warn!(secret = %r, "the health secret was deleted; keeping the data last used")
                }
                Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
                Some(Err(e)) => {
                    tracing::warn!(secret = %r, error = %e, "watching the health secret failed; retrying with backoff")
                }
            }
        }
    });
}
