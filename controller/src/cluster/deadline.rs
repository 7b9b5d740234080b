//! A time limit on every API request, as a layer of the kube client. Without one, a request
//! to an API server that accepted the connection and never answers (a half-open connection,
//! a stuck proxy, a server overloaded mid-response) waits forever, holding its permit of the
//! requests in flight and the object's cycle with it.
//!
//! The limit covers the whole exchange — response headers and body — for every request but a
//! watch: a watch's headers must come within the limit or [`WATCH_HEADERS`], whichever is
//! shorter (an API server sends them the moment the watch is set up; one that does not is a
//! dead connection, and every event waits behind it), and its body is endless by design; a
//! silent watch is the watcher's to notice (`watching`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};
use tower::BoxError;

/// A request had no (complete) answer within its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no answer within {0:?} (the request timeout)")]
pub struct TimedOut(pub Duration);

/// The longest a watch waits for its response headers: about when client-go's HTTP/2 health
/// check (30 s without a read, then a ping) gives up on a connection.
pub const WATCH_HEADERS: Duration = Duration::from_secs(30);

/// Whether a request's query asks for a watch (`watch=true`, `watch=1`).
pub fn is_watch(query: &str) -> bool {
    query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1")
}

/// Bounds each request by `limit`.
#[derive(Debug, Clone, Copy)]
pub struct Layer {
    limit: Duration,
}

impl Layer {
    /// A limit of `limit` per request.
    pub fn new(limit: Duration) -> Layer {
        Layer { limit }
    }
}

impl<S> tower::Layer<S> for Layer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline { inner, limit: self.limit }
    }
}

/// The service of [`Layer`].
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    limit: Duration,
}

impl<S, B, R> tower::Service<Request<B>> for Deadline<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    R: Body + Unpin,
    R::Error: Into<BoxError>,
{
    type Response = Response<Bounded<R>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Bounded<R>>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let limit = self.limit;
        let watching = is_watch(req.uri().query().unwrap_or(""));
        let limit = if watching { limit.min(WATCH_HEADERS) } else { limit };
        let deadline = Instant::now() + limit;
        let fut = self.inner.call(req);
        Box::pin(async move {
            match tokio::time::timeout_at(deadline, fut).await {
                Err(_) => Err(TimedOut(limit).into()),
                Ok(Err(e)) => Err(e.into()),
                Ok(Ok(res)) => {
                    let until = (!watching).then(|| Box::pin(tokio::time::sleep_until(deadline)));
                    Ok(res.map(|inner| Bounded { inner, until, limit }))
                }
            }
        })
    }
}

/// A response body that fails with [`TimedOut`] once its request's deadline has passed.
pub struct Bounded<B> {
    inner: B,
    /// None for a watch.
    until: Option<Pin<Box<Sleep>>>,
    limit: Duration,
}

impl<B> Body for Bounded<B>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let passed = this.until.as_mut().is_some_and(|until| until.as_mut().poll(cx).is_ready());
        if passed { Poll::Ready(Some(Err(TimedOut(this.limit).into()))) } else { Poll::Pending }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use tower::{Service, ServiceExt};

    /// A service whose response headers come after `head` and whose body (one chunk, then
    /// the end) after `body` more.
    fn slow(head: Duration, body: Duration) -> tower::util::BoxService<Request<()>, Response<SlowBody>, BoxError> {
        tower::util::BoxService::new(tower::service_fn(move |_req: Request<()>| async move {
            tokio::time::sleep(head).await;
            Ok::<_, BoxError>(Response::new(SlowBody { wait: Some(Box::pin(tokio::time::sleep(body))) }))
        }))
    }

    struct SlowBody {
        wait: Option<Pin<Box<Sleep>>>,
    }

    impl Body for SlowBody {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            match self.wait.as_mut() {
                None => Poll::Ready(None),
                Some(w) => {
                    std::task::ready!(w.as_mut().poll(cx));
                    self.wait = None;
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"{}")))))
                }
            }
        }
    }

    async fn outcome(limit: u64, head: u64, body: u64, uri: &str) -> Result<(), String> {
        let limit = Duration::from_secs(limit);
        let mut svc = tower::Layer::layer(&Layer::new(limit), slow(Duration::from_secs(head), Duration::from_secs(body)));
        let req = Request::builder().uri(uri).body(()).unwrap();
        let res = svc.ready().await.unwrap().call(req).await.map_err(|e| e.to_string())?;
        res.into_body().collect().await.map(|_| ()).map_err(|e| e.to_string())
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_gets_its_whole_answer_within_the_limit_and_a_watch_its_headers() {
        let late = Err("no answer within 10s (the request timeout)".to_string());
        let watch_late = Err("no answer within 30s (the request timeout)".to_string());
        let cases = [
            ("quick", 10, 1, 1, "/api/v1/pods", Ok(())),
            ("headers late", 10, 11, 0, "/api/v1/pods", late.clone()),
            ("body late", 10, 5, 6, "/api/v1/pods?limit=500", late.clone()),
            ("a big list in its time", 90, 5, 80, "/api/v1/pods?limit=500", Ok(())),
            ("a watch's headers late", 10, 11, 0, "/api/v1/pods?watch=true", late.clone()),
            ("a watch's headers past 30 s", 90, 31, 0, "/api/v1/pods?watch=true", watch_late),
            ("a watch's headers within 30 s", 90, 29, 0, "/api/v1/pods?watch=true", Ok(())),
            ("a watch's body takes its time", 10, 1, 600, "/api/v1/pods?resourceVersion=5&watch=1", Ok(())),
        ];
        for (what, limit, head, body, uri, want) in cases {
            assert_eq!(outcome(limit, head, body, uri).await, want, "{what}");
        }
    }

    #[test]
    fn watches_are_told_by_their_query() {
        let cases =
            [("watch=true", true), ("watch=1&resourceVersion=3", true), ("a=b&watch=true", true), ("watch=false", false), ("", false)];
        for (query, want) in cases {
            assert_eq!(is_watch(query), want, "{query}");
        }
    }
}
