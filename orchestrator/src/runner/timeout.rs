//! `--request-timeout`: a layer of the kube client's service stack that gives up a request
//! whose answer has not come within the limit, as kubectl gives up one: its status and headers,
//! and its whole body, except for a stream (a watch, a followed log, an upgrade to an exec's
//! WebSocket), whose answer comes at once (`200` then events, `101` then the WebSocket) and
//! whose stream after it is never cut, however long it runs. It is the outermost layer, so
//! anything below it that retries counts within it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response};
use http_body::{Body as HttpBody, Frame};
use kube::client::{Body, DynBody};
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

/// Whether `req` opens a stream: a watch, a followed log, an upgrade (exec, attach).
fn streams<B>(req: &Request<B>) -> bool {
    let query = req.uri().query().unwrap_or("");
    req.headers().contains_key(header::UPGRADE)
        || query
            .split('&')
            .any(|kv| matches!(kv, "watch=true" | "watch=1" | "follow=true" | "follow=1"))
}

impl<S> Service<Request<Body>> for RequestTimeout<S>
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let stream = streams(&req);
        let limit = self.limit;
        let deadline = tokio::time::Instant::now() + limit;
        let answer = self.inner.call(req);
        Box::pin(async move {
            let res = tokio::time::timeout_at(deadline, answer)
                .await
                .unwrap_or_else(|_| Err(Box::new(RequestTimedOut(limit))))?;
            if stream {
                return Ok(res);
            }
            Ok(res.map(|body| {
                Box::new(Bounded {
                    body,
                    limit,
                    at: Box::pin(tokio::time::sleep_until(deadline)),
                }) as Box<DynBody>
            }))
        })
    }
}

/// A response body that fails with [`RequestTimedOut`] if it has not ended by its deadline.
struct Bounded {
    body: Box<DynBody>,
    limit: Duration,
    at: Pin<Box<tokio::time::Sleep>>,
}

impl HttpBody for Bounded {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.at.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(RequestTimedOut(self.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_follows_and_upgrades_are_streams_the_rest_are_not() {
        let req = |uri: &str| Request::builder().uri(uri).body(()).expect("a request");
        assert!(streams(&req(
            "/api/v1/namespaces/a/pods?fieldSelector=x&watch=true&timeoutSeconds=290"
        )));
        assert!(streams(&req("/api/v1/namespaces/a/pods/p/log?follow=true")));
        let exec = Request::builder()
            .uri("/api/v1/namespaces/a/pods/p/exec?command=sh")
            .header(header::UPGRADE, "websocket")
            .body(())
            .expect("a request");
        assert!(streams(&exec));
        assert!(!streams(&req("/api/v1/namespaces/a/pods/p")));
        assert!(!streams(&req(
            "/api/v1/namespaces/a/pods?fieldSelector=watch%3Dtrue"
        )));
        assert_eq!(words(Duration::from_millis(1500)), "1500ms");
        assert_eq!(words(Duration::from_secs(30)), "30s");
    }
}
