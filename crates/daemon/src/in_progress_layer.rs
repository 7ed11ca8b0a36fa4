//! A tower layer for servers (the API server's HTTP, a driver's gRPC) that marks each request
//! [`in_progress`] from its arrival until its response is ready, so a shutdown cut off by the
//! watchdog names the requests it was still answering.

use crate::in_progress::in_progress;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// How a request is named, from its method and URI (say `the request GET /api/v1/pods`).
/// Only what the describer picks is kept: query strings and headers need not be.
pub type Describe = fn(&http::Method, &http::Uri) -> String;

/// The layer: wraps a service in [`InProgressService`].
#[derive(Debug, Clone, Copy)]
pub struct InProgressLayer {
    describe: Describe,
}

impl InProgressLayer {
    /// A layer naming each request with `describe`.
    pub fn new(describe: Describe) -> InProgressLayer {
        InProgressLayer { describe }
    }
}

impl<S> tower::Layer<S> for InProgressLayer {
    type Service = InProgressService<S>;

    fn layer(&self, inner: S) -> InProgressService<S> {
        InProgressService {
            inner,
            describe: self.describe,
        }
    }
}

/// A service whose requests are marked in progress until their responses are ready.
#[derive(Debug, Clone)]
pub struct InProgressService<S> {
    inner: S,
    describe: Describe,
}

impl<S, B> tower::Service<http::Request<B>> for InProgressService<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let busy = in_progress((self.describe)(req.method(), req.uri()));
        let answer = self.inner.call(req);
        Box::pin(async move {
            let _busy = busy;
            answer.await
        })
    }
}

/// A wrapped gRPC service keeps its name, so it can still be added to a tonic server.
impl<S: tonic::server::NamedService> tonic::server::NamedService for InProgressService<S> {
    const NAME: &'static str = S::NAME;
}

/// Names a gRPC request by its method path: `the CSI call /csi.v1.Node/NodeGetVolumeStats`.
pub fn csi_call(_: &http::Method, uri: &http::Uri) -> String {
    format!("the CSI call {}", uri.path())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer as _, Service as _, ServiceExt as _};

    #[tokio::test]
    async fn a_request_is_pending_until_its_answer_is_ready() {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let released = std::sync::Arc::new(tokio::sync::Mutex::new(Some(released)));
        let inner = tower::service_fn(move |_req: http::Request<()>| {
            let released = released.clone();
            async move {
                if let Some(rx) = released.lock().await.take() {
                    let _ = rx.await;
                }
                Ok::<_, std::convert::Infallible>("answer")
            }
        });
        let mut svc = InProgressLayer::new(csi_call).layer(inner);
        let req = http::Request::builder()
            .uri("/csi.v1.Test/Hold?x=1")
            .body(())
            .unwrap();
        let answer = svc.ready().await.unwrap().call(req);
        let what = "the CSI call /csi.v1.Test/Hold".to_string();
        assert!(crate::in_progress::pending().contains(&what));
        release.send(()).unwrap();
        assert_eq!(answer.await.unwrap(), "answer");
        assert!(!crate::in_progress::pending().contains(&what));
    }
}
