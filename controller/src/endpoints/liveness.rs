//! The liveness endpoint (Kopf's `--liveness`): an HTTP server answering `GET <path>` with
//! 200 and a JSON object of the probe handlers' results (each probe runs at most once per
//! `cache` period), or 500 when a probe fails, or while this replica believes it holds a
//! Lease past its renewal deadline (a stuck coordination loop: restarting it is the cure).
//! Load balancers and kubelets poll it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bosun_proto::v1 as pb;
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::state::registry::Handler;

/// How long probe results are reused.
const CACHE: Duration = Duration::from_secs(10);

struct Probes {
    handlers: Vec<Handler>,
    servers: crate::handlers::dispatch::Servers,
    last: Mutex<Option<(Instant, Result<Value, ProbeFailed>)>>,
}

impl Probes {
    async fn run(&self) -> Result<Value, ProbeFailed> {
        let mut out = Map::new();
        for h in &self.handlers {
            let req =
                pb::ActivityRequest { handler_id: h.id.clone(), kind: pb::HandlerKind::Probe as i32, retry: 0, handler_key: h.key.clone() };
            let answer = self.servers[h.server].activity(req, h.call_timeout.min(Duration::from_secs(30))).await;
            match answer {
                Ok(a) if a.outcome == pb::Outcome::Success as i32 => {
                    let v = serde_json::from_slice(&a.result).unwrap_or(Value::Null);
                    out.insert(h.id.clone(), v);
                }
                Ok(a) => return Err(ProbeFailed::Failed { id: h.id.clone(), message: a.message }),
                Err(e) => return Err(ProbeFailed::NotRun { id: h.id.clone(), why: e }),
            }
        }
        Ok(Value::Object(out))
    }
}

async fn answer(State(probes): State<Arc<Probes>>) -> Response {
    if let Err(why) = crate::metrics::global().liveness() {
        return (StatusCode::INTERNAL_SERVER_ERROR, why).into_response();
    }
    let mut last = probes.last.lock().await;
    let fresh = last.as_ref().is_some_and(|(at, _)| at.elapsed() < CACHE);
    if !fresh {
        *last = Some((Instant::now(), probes.run().await));
    }
    match &last.as_ref().expect("just filled").1 {
        Ok(v) => (StatusCode::OK, axum::Json(v.clone())).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Why the probes answer 500.
#[derive(Debug, thiserror::Error)]
enum ProbeFailed {
    #[error("probe '{id}' failed: {message}")]
    Failed { id: String, message: String },
    #[error("probe '{id}' could not run: {why}")]
    NotRun { id: String, why: crate::handlers::dispatch::CallFailure },
}

/// A liveness URL that cannot be served.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadUrl {
    /// Not `http://`.
    #[error("liveness URL '{0}' must start with http://")]
    NotHttp(String),
    /// No address.
    #[error("liveness URL '{0}' names no host:port")]
    NoAddress(String),
}

/// Splits a liveness URL (`http://0.0.0.0:8080/healthz`) into a bind address and a path.
pub fn parse_url(url: &str) -> Result<(String, String), BadUrl> {
    let rest = url.strip_prefix("http://").ok_or_else(|| BadUrl::NotHttp(url.into()))?;
    let (addr, path) = rest.split_once('/').map(|(a, p)| (a, format!("/{p}"))).unwrap_or((rest, "/".into()));
    if addr.is_empty() {
        return Err(BadUrl::NoAddress(url.into()));
    }
    Ok((addr.to_string(), path))
}

/// Serves the endpoint on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    path: String,
    handlers: Vec<Handler>,
    servers: crate::handlers::dispatch::Servers,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let probes = Arc::new(Probes { handlers, servers, last: Mutex::new(None) });
    let app = axum::Router::new().route(&path, axum::routing::get(answer)).with_state(probes);
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_urls_split_into_address_and_path() {
        let cases = [
            ("http://0.0.0.0:8080/healthz", Ok(("0.0.0.0:8080".to_string(), "/healthz".to_string()))),
            ("http://127.0.0.1:9", Ok(("127.0.0.1:9".to_string(), "/".to_string()))),
            ("https://x:1/h", Err("liveness URL 'https://x:1/h' must start with http://".to_string())),
            ("http:///h", Err("liveness URL 'http:///h' names no host:port".to_string())),
        ];
        for (url, want) in cases {
            assert_eq!(parse_url(url).map_err(|e| e.to_string()), want, "{url}");
        }
    }

    #[tokio::test]
    async fn probes_are_called_by_their_registrations_key() {
        let server = Arc::new(crate::handlers::recording::Recording::default());
        let probe = |id: &str, key: &str| {
            let spec = pb::HandlerSpec { id: id.into(), key: key.into(), kind: pb::HandlerKind::Probe as i32, ..Default::default() };
            Handler::from_spec(&spec, 0).unwrap()
        };
        let servers: crate::handlers::dispatch::Servers = Arc::new(vec![server.clone()]);
        let probes = Probes { handlers: vec![probe("a", "probe-a"), probe("b", "")], servers, last: Mutex::new(None) };
        assert_eq!(probes.run().await.unwrap(), serde_json::json!({"a": 1, "b": 1}));
        let calls = server.calls.lock().clone();
        assert_eq!(calls, [("Activity", "a".into(), "probe-a".into()), ("Activity", "b".into(), String::new())]);
    }
}
