//! Marks every request of a Kubernetes client [`in_progress`] while it is open, from the
//! tracing span kube's client opens around each request (name `HTTP`, fields `http.method` and
//! `http.url`; it lasts until a watch's body ends). So every component that talks to an API
//! server names the requests a cut-off shutdown was waiting for, with nothing to add where the
//! client is used.

use crate::in_progress::in_progress;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The name of the span kube's client opens for each request.
const SPAN_NAME: &str = "HTTP";

/// The target prefix of kube's client spans.
const TARGET: &str = "kube_client";

/// The layer to add to the tracing subscriber; it sees only kube's request spans, whatever the
/// log filter says.
pub fn layer<S>() -> impl Layer<S> + Send + Sync + 'static
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let only_requests = FilterFn::new(|meta| {
        meta.is_span() && meta.name() == SPAN_NAME && meta.target().starts_with(TARGET)
    })
    .with_max_level_hint(tracing::Level::DEBUG);
    KubeRequests.with_filter(only_requests)
}

/// See [`layer`].
#[derive(Debug, Clone, Copy, Default)]
pub struct KubeRequests;

#[derive(Default)]
struct Request {
    method: String,
    url: String,
}

impl Visit for Request {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "http.method" => self.method = format!("{value:?}"),
            "http.url" => self.url = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S> Layer<S> for KubeRequests
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut request = Request::default();
        attrs.record(&mut request);
        if let Some(span) = ctx.span(id) {
            let busy = in_progress(format!(
                "the API server request {} {}",
                request.method,
                without_query(&request.url)
            ));
            // Dropped with the span's extensions when the span closes.
            span.extensions_mut().insert(busy);
        }
    }
}

/// A URL without its query: a watch's or list's parameters say little and may be long.
fn without_query(url: &str) -> &str {
    url.split_once('?').map_or(url, |(path, _)| path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt as _;

    #[test]
    fn a_kube_request_span_is_in_progress_while_open() {
        let subscriber = tracing_subscriber::registry().with(layer());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::debug_span!(
                target: "kube_client::client::builder",
                "HTTP",
                http.method = %"GET",
                http.url = %"https://127.0.0.1:6443/api/v1/nodes/n1?timeout=5s",
            );
            let what = "the API server request GET https://127.0.0.1:6443/api/v1/nodes/n1";
            assert!(
                crate::in_progress::pending().contains(&what.to_string()),
                "{:?}",
                crate::in_progress::pending()
            );
            drop(span);
            assert!(!crate::in_progress::pending().contains(&what.to_string()));
            let other = tracing::debug_span!("HTTP", http.method = %"GET", http.url = %"/x");
            assert!(
                !crate::in_progress::pending()
                    .iter()
                    .any(|p| p.ends_with("/x"))
            );
            drop(other);
        });
    }
}
