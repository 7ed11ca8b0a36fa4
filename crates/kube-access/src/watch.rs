//! Watches that run on their own task for the process's life: a reflector of whole objects
//! ([`spawn_reflector`]) and the loop under every watch here ([`spawn_watch_loop`]); the cache of
//! small records is [`crate::compact_watch`].

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};

/// A kind a watch can follow and cache: a Kubernetes resource of a static type (every
/// k8s-openapi kind), read from JSON, handed between tasks.
pub trait WatchKind:
    Resource<DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> WatchKind for K where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// Watches every object of `api` into a cache (without managedFields, which nothing here reads),
/// retrying with backoff and logging failures as `what`; the watch runs until the runtime stops.
pub fn spawn_reflector<K: WatchKind>(api: Api<K>, what: &'static str) -> Store<K> {
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .modify(|o: &mut K| o.meta_mut().managed_fields = None)
        .default_backoff();
    spawn_watch_loop(reflector::reflector(writer, stream), what, |_| {});
    store
}

/// Drives a watch `stream` on its own task until the runtime stops, handing each event to
/// `apply` and logging each failure as `what` (the stream retries with its backoff).
pub fn spawn_watch_loop<T, S>(
    stream: S,
    what: &'static str,
    mut apply: impl FnMut(T) + Send + 'static,
) where
    S: futures::Stream<Item = Result<T, watcher::Error>> + Send + 'static,
{
    let mut stream = Box::pin(stream);
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => apply(event),
                Err(e) => {
                    tracing::warn!(resource = what, error = %e, "watch failed; retrying with backoff");
                }
            }
        }
    });
}
