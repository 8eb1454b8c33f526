//! `--request-timeout`: a layer of the kube client's service stack that gives up a request
//! whose answer (the response's status and headers) has not come within the limit, as kubectl
//! gives up one. It is the outermost layer, so kube-rs's retries of a 429/503/504 count within
//! it. A watch's or an exec's answer comes at once (`200` then events, `101` then the
//! WebSocket), so what streams after it is never cut, however long it runs.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::{BoxError, Layer, Service};

/// A request the API server did not answer within `--request-timeout`.
#[derive(Debug, thiserror::Error)]
#[error(
    "the server was unable to return a response in the time allotted (--request-timeout {}: \
     give a longer one, or 0 for no limit)",
    words(*.0)
)]
pub struct RequestTimedOut(pub Duration);

/// A duration as `--request-timeout` takes it: `30s`, `500ms`.
pub fn words(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The layer: `limit` per request.
#[derive(Debug, Clone, Copy)]
pub struct RequestTimeoutLayer(pub Duration);

impl<S> Layer<S> for RequestTimeoutLayer {
    type Service = RequestTimeout<S>;

    fn layer(&self, inner: S) -> RequestTimeout<S> {
        RequestTimeout {
            inner,
            limit: self.0,
        }
    }
}

/// The service [`RequestTimeoutLayer`] makes.
#[derive(Debug, Clone)]
pub struct RequestTimeout<S> {
    inner: S,
    limit: Duration,
}

impl<S, Req> Service<Req> for RequestTimeout<S>
where
    S: Service<Req, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let answer = self.inner.call(req);
        let limit = self.limit;
        Box::pin(async move {
            tokio::time::timeout(limit, answer)
                .await
                .unwrap_or_else(|_| Err(Box::new(RequestTimedOut(limit))))
        })
    }
}
