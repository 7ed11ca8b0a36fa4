//! Answering one unary gRPC call with a closure, for services that route some methods by hand
//! (the reference driver's legacy shape, the health proxy) instead of through generated code.

use tonic::Status;
use tonic::body::Body;
use tonic::codegen::http;

struct Unary<F>(F);

impl<F, Fut, Req, Resp> tonic::server::UnaryService<Req> for Unary<F>
where
    F: FnMut(Req) -> Fut,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
    Resp: Send + 'static,
{
    type Response = Resp;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<tonic::Response<Resp>, Status>> + Send + 'static>,
    >;
    fn call(&mut self, req: tonic::Request<Req>) -> Self::Future {
        let answer = (self.0)(req.into_inner());
        Box::pin(async move { answer.await.map(tonic::Response::new) })
    }
}

/// Decodes the unary request `req` as `Req`, answers it with `f` and encodes the answer (or the
/// status `f` returns) as tonic's generated servers do.
pub async fn serve_unary<Req, Resp, F, Fut>(req: http::Request<Body>, f: F) -> http::Response<Body>
where
    F: FnMut(Req) -> Fut,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
{
    let codec = tonic_prost::ProstCodec::<Resp, Req>::default();
    tonic::server::Grpc::new(codec).unary(Unary(f), req).await
}
