//! Waiting for an Event in the `default` namespace, where the writers' Events about
//! cluster-scoped objects and the test claims' Events land.

use crate::wait::wait_until;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use std::time::Duration;

/// Waits up to `timeout` (as `what`) until an Event in `default` satisfies `matches`.
pub async fn wait_event(
    client: &kube::Client,
    timeout: Duration,
    what: &str,
    matches: impl Fn(&Event) -> bool,
) {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    wait_until(timeout, what, || async {
        events
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .iter()
            .any(&matches)
    })
    .await;
}
