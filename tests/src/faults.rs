//! A fault-injecting HTTP proxy in front of the dev cluster: answers chosen requests with
//! chosen errors (429 with Retry-After, 500, 409 …) and forwards the rest, recording what
//! it saw, so the controller's behaviour on a misbehaving API server can be tested.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// One injected answer: method, path suffix, how many times, status, extra headers.
#[derive(Debug, Clone)]
pub struct Fault {
    /// Requests with this method…
    pub method: Method,
    /// …whose path ends with this…
    pub path_suffix: String,
    /// …are answered this many more times…
    pub times: usize,
    /// …with this status…
    pub status: StatusCode,
    /// …and these headers…
    pub headers: Vec<(String, String)>,
    /// …and this body (default: a Status for `status`)…
    pub body: Option<String>,
    /// …or, when set, headers only and a body that never ends (a silent, stuck watch).
    pub hang: bool,
    /// Only requests whose query contains this (for example `watch=true`).
    pub query_contains: Option<String>,
    /// Only requests with this Content-Type (for example a JSON patch's).
    pub content_type: Option<String>,
    /// The request is forwarded first, and lands; only its answer is replaced (an answer lost
    /// after the API server applied the request).
    pub after_forwarding: bool,
}

impl Fault {
    /// Answers one request `method … path_suffix` with `status`.
    pub fn new(method: Method, path_suffix: &str, status: StatusCode) -> Fault {
        Fault {
            method,
            path_suffix: path_suffix.into(),
            times: 1,
            status,
            headers: vec![],
            body: None,
            hang: false,
            query_contains: None,
            content_type: None,
            after_forwarding: false,
        }
    }
}

/// What the proxy saw: (when, method, path, status answered).
pub type Seen = Arc<Mutex<Vec<(Instant, Method, String, u16)>>>;

type Body = BoxBody<Bytes, hyper::Error>;

fn status_body(status: StatusCode) -> Full<Bytes> {
    let reason = status.canonical_reason().unwrap_or("Error").replace(' ', "");
    Full::new(Bytes::from(format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"injected {}","reason":"{reason}","code":{}}}"#,
        status.as_u16(),
        status.as_u16()
    )))
}

/// Starts the proxy to `upstream` (`http://127.0.0.1:PORT`); returns its URL and the record.
pub async fn start(upstream: String, faults: Vec<Fault>) -> (String, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let faults = Arc::new(Mutex::new(faults));
    let seen: Seen = Arc::default();
    let client: Client<HttpConnector, Incoming> = Client::builder(TokioExecutor::new()).build_http();
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let (faults, seen, client, upstream) = (faults.clone(), record.clone(), client.clone(), upstream.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (faults, seen, client, upstream) = (faults.clone(), seen.clone(), client.clone(), upstream.clone());
                    async move {
                        let method = req.method().clone();
                        let path = req.uri().path().to_string();
                        let query = req.uri().query().unwrap_or("").to_string();
                        let content_type = req.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                        let injected = {
                            let mut fs = faults.lock().unwrap();
                            let hit = |f: &Fault| {
                                f.times > 0
                                    && f.method == method
                                    && path.ends_with(&f.path_suffix)
                                    && f.query_contains.as_ref().is_none_or(|q| query.contains(q.as_str()))
                                    && f.content_type.as_ref().is_none_or(|c| content_type.starts_with(c.as_str()))
                            };
                            fs.iter_mut().find(|f| hit(f)).map(|f| {
                                f.times -= 1;
                                f.clone()
                            })
                        };
                        if let Some(f) = injected {
                            if f.after_forwarding {
                                let (mut parts, body) = req.into_parts();
                                let pq = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
                                parts.uri = format!("{upstream}{pq}").parse().unwrap();
                                // It lands upstream; its answer is read and dropped.
                                if let Ok(res) = client.request(Request::from_parts(parts, body)).await {
                                    let _ = res.into_body().collect().await;
                                }
                            }
                            seen.lock().unwrap().push((Instant::now(), method, path, f.status.as_u16()));
                            let mut res = Response::builder().status(f.status).header("content-type", "application/json");
                            for (k, v) in &f.headers {
                                res = res.header(k, v);
                            }
                            let body: Body = if f.hang {
                                let (_tx, rx) = tokio::sync::mpsc::channel::<Result<hyper::body::Frame<Bytes>, hyper::Error>>(1);
                                // The sender is leaked on purpose: the body stays open and silent.
                                std::mem::forget(_tx);
                                http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx)).boxed()
                            } else if let Some(b) = &f.body {
                                Full::new(Bytes::from(b.clone())).map_err(|never| match never {}).boxed()
                            } else {
                                status_body(f.status).map_err(|never| match never {}).boxed()
                            };
                            return Ok::<_, Infallible>(res.body(body).unwrap());
                        }
                        let (mut parts, body) = req.into_parts();
                        let pq = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
                        parts.uri = format!("{upstream}{pq}").parse().unwrap();
                        match client.request(Request::from_parts(parts, body)).await {
                            Ok(res) => {
                                seen.lock().unwrap().push((Instant::now(), method, path, res.status().as_u16()));
                                Ok(res.map(|b| b.boxed()))
                            }
                            Err(e) => {
                                let body: Body = Full::new(Bytes::from(e.to_string())).map_err(|never| match never {}).boxed();
                                Ok(Response::builder().status(502).body(body).unwrap())
                            }
                        }
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    (url, seen)
}

/// A kube client for a plain-http URL, built as the controller builds its own (no retries of
/// kube's, the default request timeout).
pub fn client_for(url: &str) -> kube::Client {
    client_with(url, Default::default())
}

/// [`client_for`] with other request limits.
pub fn client_with(url: &str, networking: bosun_controller::cluster::client::Networking) -> kube::Client {
    bosun_controller::cluster::client::build(kube::Config::new(url.parse().unwrap()), &networking).unwrap()
}
