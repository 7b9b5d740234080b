//! Every request sent to the API server counted in the metrics (`bosun_api_requests_total`,
//! its latency, the requests in flight): the outermost layer of the controller's kube client
//! ([`super::client`]), so the watcher's lists and watches count as well as the controller's
//! own calls, and each of their attempts (the client retries nothing by itself).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Method, Request, Response};

use super::deadline::{self, TimedOut};
use crate::metrics::{self, ApiLabels, Up, VerbLabels};

/// Wraps a kube client's service so that every request is counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layer;

impl<S> tower::Layer<S> for Layer {
    type Service = Metered<S>;

    fn layer(&self, inner: S) -> Metered<S> {
        Metered { inner }
    }
}

/// The service of [`Layer`].
#[derive(Debug, Clone)]
pub struct Metered<S> {
    inner: S,
}

impl<S, B, R> tower::Service<Request<B>> for Metered<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    S::Error: std::ops::Deref<Target = dyn std::error::Error + Send + Sync> + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let (verb, resource) = labels(req.method(), req.uri().path(), req.uri().query().unwrap_or(""));
        let m = metrics::global();
        let in_flight = Up::new(m.api_in_flight.clone());
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            drop(in_flight);
            let code = match &res {
                Ok(r) => r.status().as_u16().to_string(),
                Err(e) if e.downcast_ref::<TimedOut>().is_some() => "timeout".to_string(),
                Err(_) => "error".to_string(),
            };
            m.api_request_seconds.get_or_create(&VerbLabels { verb, resource: resource.clone() }).observe(started.elapsed().as_secs_f64());
            m.api_requests.get_or_create(&ApiLabels { verb, resource, code }).inc();
            res
        })
    }
}

/// The verb and resource of a request, as the API server's audit log names them: `list` and
/// `watch` for collections, `get` for one object; the resource `plural.group[/subresource]`,
/// or `other` for discovery and other paths.
pub fn labels(method: &Method, path: &str, query: &str) -> (&'static str, String) {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/... or /apis/group/version/...
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => ("", &[][..]),
    };
    // namespaces/ns/plural/... or plural/... (the namespaces resource itself when nothing follows)
    let rest = match rest {
        ["namespaces", _ns, more @ ..] if !more.is_empty() => more,
        r => r,
    };
    let watching = deadline::is_watch(query);
    let (resource, one) = match rest {
        [plural] => (metrics::resource_label(group, plural), false),
        [plural, _name] => (metrics::resource_label(group, plural), true),
        [plural, _name, sub, ..] => (format!("{}/{sub}", metrics::resource_label(group, plural)), true),
        _ => return (verb_of(method, false, watching), "other".to_string()),
    };
    (verb_of(method, one, watching), resource)
}

fn verb_of(method: &Method, one: bool, watching: bool) -> &'static str {
    match *method {
        Method::GET if watching => "watch",
        Method::GET if one => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if one => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_labelled_by_verb_and_resource() {
        let cases = [
            (Method::GET, "/apis/kopf.dev/v1/namespaces/default/kopfexamples", "", ("list", "kopfexamples.kopf.dev")),
            (Method::GET, "/apis/kopf.dev/v1/kopfexamples", "watch=true&resourceVersion=5", ("watch", "kopfexamples.kopf.dev")),
            (Method::GET, "/apis/kopf.dev/v1/namespaces/default/kopfexamples/x", "", ("get", "kopfexamples.kopf.dev")),
            (Method::PATCH, "/apis/kopf.dev/v1/namespaces/default/kopfexamples/x/status", "", ("patch", "kopfexamples.kopf.dev/status")),
            (Method::POST, "/api/v1/namespaces/default/events", "", ("create", "events")),
            (Method::PUT, "/apis/coordination.k8s.io/v1/namespaces/default/leases/bosun", "", ("update", "leases.coordination.k8s.io")),
            (Method::GET, "/api/v1/namespaces", "", ("list", "namespaces")),
            (Method::GET, "/api/v1/namespaces/default", "", ("get", "namespaces")),
            (Method::DELETE, "/api/v1/namespaces/default/pods", "", ("deletecollection", "pods")),
            (Method::DELETE, "/api/v1/namespaces/default/pods/p", "", ("delete", "pods")),
            (Method::GET, "/apis", "", ("list", "other")),
            (Method::GET, "/version", "", ("list", "other")),
            (Method::GET, "/apis/kopf.dev/v1", "", ("list", "other")),
        ];
        for (method, path, query, (verb, resource)) in cases {
            assert_eq!(labels(&method, path, query), (verb, resource.to_string()), "{method} {path}?{query}");
        }
    }
}
