//! client-go's retry, as a layer of the kube client's service stack: a request the API server
//! answers 429 or 5xx *with* a `Retry-After` header (API Priority and Fairness throttling a
//! burst, an API server shutting down) is sent again once those seconds have passed, up to
//! [`MAX_RETRIES`] times, as kubectl does. Any other answer, a 503 without the header included,
//! is given back as it came, at once: kube's own retry (off, see `client_of`) tried those too,
//! with a back-off that made one failing DELETE take minutes. The layer sits below
//! `--request-timeout`'s, so the waits count within it.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{header, Request, Response};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, DynBody};
use tower::retry::Policy;
use tower::{BoxError, Layer, Service};

/// How many times a request is sent again (client-go's `maxRetries`).
pub const MAX_RETRIES: u32 = 10;

/// The longest wait a `Retry-After` is taken for; a longer one is waited this long.
pub const MAX_WAIT: Duration = Duration::from_secs(10);

/// The layer.
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryAfterLayer;

impl<S> Layer<S> for RetryAfterLayer {
    type Service = RetryAfter<S>;

    fn layer(&self, inner: S) -> RetryAfter<S> {
        RetryAfter {
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
        }
    }
}

/// The service [`RetryAfterLayer`] makes. The inner service is shared by the calls in flight:
/// each holds it only to see it ready and to start its request, not while the answer comes.
#[derive(Debug)]
pub struct RetryAfter<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
}

impl<S> Clone for RetryAfter<S> {
    fn clone(&self) -> Self {
        RetryAfter {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// How long the API server asks a request to wait before it is sent again, when its answer is
/// one that client-go sends again: 429 or 5xx with `Retry-After` in whole seconds.
fn wait_asked<B>(res: &Response<B>) -> Option<Duration> {
    let status = res.status().as_u16();
    if status != 429 && !(500..600).contains(&status) {
        return None;
    }
    let secs: u64 = res
        .headers()
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_WAIT))
}

/// A copy of `req` to send again: only one whose body is whole in memory (every request
/// railsweep makes but an exec's stream). kube's own retry policy copies a request so; its
/// copy is taken rather than written twice (the policy's retry rule is not used).
fn again(req: &Request<Body>) -> Option<Request<Body>> {
    Policy::<Request<Body>, Response<Box<DynBody>>, BoxError>::clone_request(
        &mut RetryPolicy::default(),
        req,
    )
}

impl<S> Service<Request<Body>> for RetryAfter<S>
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Each call sees the inner service ready itself, under its lock.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            let mut req = req;
            let mut sent_again = 0;
            loop {
                let next = (sent_again < MAX_RETRIES).then(|| again(&req)).flatten();
                let answer = {
                    let mut s = inner.lock().await;
                    poll_fn(|cx| s.poll_ready(cx)).await?;
                    s.call(req)
                };
                let res = answer.await?;
                match (wait_asked(&res), next) {
                    (Some(wait), Some(copy)) => {
                        tokio::time::sleep(wait).await;
                        req = copy;
                        sent_again += 1;
                    }
                    _ => return Ok(res),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body::Frame;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A body with nothing in it.
    struct Empty;

    impl http_body::Body for Empty {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(None)
        }
    }

    /// An API server that answers the first `bad` requests with `status` (and `Retry-After:
    /// retry_after` when given), then 200; counts what it was sent.
    struct Server {
        bad: u32,
        status: u16,
        retry_after: Option<&'static str>,
        seen: Arc<AtomicU32>,
    }

    impl Service<Request<Body>> for Server {
        type Response = Response<Box<DynBody>>;
        type Error = BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _req: Request<Body>) -> Self::Future {
            let n = self.seen.fetch_add(1, Ordering::SeqCst);
            let mut res = Response::builder().status(if n < self.bad { self.status } else { 200 });
            if let (true, Some(v)) = (n < self.bad, self.retry_after) {
                res = res.header(header::RETRY_AFTER, v);
            }
            let res = res
                .body(Box::new(Empty) as Box<DynBody>)
                .expect("a response");
            Box::pin(async move { Ok(res) })
        }
    }

    /// The status of a DELETE through the layer, and how many times the server saw it.
    async fn send(bad: u32, status: u16, retry_after: Option<&'static str>) -> (u16, u32) {
        let seen = Arc::new(AtomicU32::new(0));
        let mut svc = RetryAfterLayer.layer(Server {
            bad,
            status,
            retry_after,
            seen: Arc::clone(&seen),
        });
        let req = Request::delete("/api/v1/namespaces/railbench/pods/p")
            .body(Body::from(b"{}".to_vec()))
            .expect("a request");
        let res = svc.call(req).await.expect("an answer");
        (res.status().as_u16(), seen.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn only_an_answer_with_retry_after_is_sent_again_as_client_go_does() {
        // Throttled twice by priority and fairness: sent again after the wait, then answered.
        assert_eq!(send(2, 429, Some("0")).await, (200, 3));
        // A 5xx with the header, likewise.
        assert_eq!(send(1, 503, Some("0")).await, (200, 2));
        // A 503 without it (a proxy's page, a server that is down): given back at once.
        assert_eq!(send(1, 503, None).await, (503, 1));
        // A 404, with or without the header, is an answer.
        assert_eq!(send(1, 404, Some("0")).await, (404, 1));
        // A server that never stops asking: sent again MAX_RETRIES times, then its answer.
        assert_eq!(send(u32::MAX, 429, Some("0")).await, (429, MAX_RETRIES + 1));
    }

    #[test]
    fn the_wait_is_the_servers_in_seconds_and_bounded() {
        let res = |status: u16, v: &str| {
            Response::builder()
                .status(status)
                .header(header::RETRY_AFTER, v)
                .body(())
                .expect("a response")
        };
        assert_eq!(wait_asked(&res(429, "1")), Some(Duration::from_secs(1)));
        assert_eq!(wait_asked(&res(504, " 3 ")), Some(Duration::from_secs(3)));
        assert_eq!(wait_asked(&res(429, "3600")), Some(MAX_WAIT));
        // An HTTP date is not a count of seconds (the API server sends seconds).
        assert_eq!(wait_asked(&res(429, "Wed, 21 Oct 2026 07:28:00 GMT")), None);
        assert_eq!(wait_asked(&res(409, "1")), None);
    }
}
