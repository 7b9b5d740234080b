//! One replica's path to the in-memory API server, with faults: a tower Service in front of
//! the dev cluster's router, under the controller's own production layers (metrics, the
//! request time limit), so requests are bounded as in production.
//!
//! Faults, drawn from the link's seeded RNG per request while the world is not calm: latency,
//! a hung request (no answer until the world calms down or the client's own time limit), an
//! injected 409/429/500/503/504 (a `Status` body as the API server writes it), a reset before
//! the request reaches the server or after it was applied (the answer lost), and watches whose
//! body ends early. Besides, the whole link can be partitioned for a window (every request and
//! open response hangs until it heals) or severed for good (kill -9: everything fails now).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use rand::Rng;
use tokio::sync::watch;
use tower::{BoxError, Service, ServiceBuilder};

use bosun_controller::cluster::{client::REQUEST_TIMEOUT, deadline, metered};

/// The state of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Requests go through (with the drawn faults).
    Up,
    /// Requests and open responses hang until it heals.
    Partitioned,
    /// Everything fails at once, for good (the replica was killed).
    Severed,
}

/// How often each fault is drawn per request, while the world is not calm.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// Some latency (up to 1.5 s).
    pub latency: f64,
    /// A request that hangs.
    pub hang: f64,
    /// An injected error status.
    pub status: f64,
    /// A reset before the server.
    pub reset: f64,
    /// A reset after the server applied it.
    pub lost: f64,
    /// A watch whose body ends early (1–30 s in).
    pub short_watch: f64,
    /// A watch that stalls (0–10 s in) for 35–70 s without ending, while the link is up: its
    /// events come late, after the workers that wrote them have retired, or the watcher takes it
    /// for dead (65 s) and reopens it.
    pub stalled_watch: f64,
}

impl Default for Rates {
    fn default() -> Self {
        Rates { latency: 0.1, hang: 0.01, status: 0.03, reset: 0.01, lost: 0.01, short_watch: 0.3, stalled_watch: stalled_watches() }
    }
}

/// How often a watch stalls: `BOSUN_SIM_STALLED_WATCHES` (0.05; 0.5 to look for what late
/// events break).
fn stalled_watches() -> f64 {
    std::env::var("BOSUN_SIM_STALLED_WATCHES").ok().and_then(|v| v.parse().ok()).filter(|r: &f64| (0.0..=1.0).contains(r)).unwrap_or(0.05)
}

impl Rates {
    /// No faults.
    pub fn none() -> Rates {
        Rates { latency: 0.0, hang: 0.0, status: 0.0, reset: 0.0, lost: 0.0, short_watch: 0.0, stalled_watch: 0.0 }
    }
}

/// One replica incarnation's link to the API server.
#[derive(Clone)]
pub struct Link {
    state: Arc<watch::Sender<State>>,
    calm: watch::Receiver<bool>,
    draws: Arc<super::Draws>,
    rates: Rates,
    /// Where the writes of objects that meet a fault are noted.
    journal: Option<super::journal::Journal>,
}

/// What the draw decided for one request.
enum Fault {
    None,
    Latency(Duration),
    Hang,
    Status(u16),
    Reset,
    Lost,
}

fn reset() -> BoxError {
    Box::new(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset (simulated)"))
}

/// The body type of the link's answers.
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

impl Link {
    /// A link with its own RNG; faults stop once `calm` is true.
    pub fn new(seed: u64, calm: watch::Receiver<bool>, rates: Rates) -> Link {
        Link { state: Arc::new(watch::Sender::new(State::Up)), calm, draws: Arc::new(super::Draws::new(seed)), rates, journal: None }
    }

    /// Notes in `journal` each object whose write meets a fault.
    pub fn journaling(mut self, journal: super::journal::Journal) -> Link {
        self.journal = Some(journal);
        self
    }

    /// Sets the link's state (a severed link stays severed).
    pub fn set(&self, state: State) {
        self.state.send_if_modified(|s| {
            let changed = *s != State::Severed && *s != state;
            if changed {
                *s = state;
            }
            changed
        });
    }

    fn calm(&self) -> bool {
        *self.calm.borrow()
    }

    /// When a watch stalls and for how long, drawn apart from the other faults (under a key
    /// of its own) so that those stay what their seeds gave before.
    fn stall(&self, key: &str) -> Option<(Duration, Duration)> {
        if self.calm() {
            return None;
        }
        let mut rng = self.draws.rng(&format!("{key} stall"));
        rng.random_bool(self.rates.stalled_watch)
            .then(|| (Duration::from_millis(rng.random_range(0..10_000)), Duration::from_millis(rng.random_range(35_000..70_000))))
    }

    fn draw(&self, key: &str, watch: bool) -> (Fault, Option<Duration>) {
        if self.calm() {
            return (Fault::None, None);
        }
        let r = self.rates;
        let mut rng = self.draws.rng(key);
        let short = (watch && rng.random_bool(r.short_watch)).then(|| Duration::from_millis(rng.random_range(1_000..30_000)));
        let x: f64 = rng.random();
        let fault = if x < r.hang {
            Fault::Hang
        } else if x < r.hang + r.status {
            Fault::Status([409, 429, 500, 503, 504][rng.random_range(0..5)])
        } else if x < r.hang + r.status + r.reset {
            Fault::Reset
        } else if x < r.hang + r.status + r.reset + r.lost {
            Fault::Lost
        } else if x < r.hang + r.status + r.reset + r.lost + r.latency {
            Fault::Latency(Duration::from_millis(rng.random_range(1..1_500)))
        } else {
            Fault::None
        };
        (fault, short)
    }

    /// Waits until the link is up (an error once severed).
    async fn passable(&self) -> Result<(), BoxError> {
        let mut rx = self.state.subscribe();
        loop {
            let now = *rx.borrow_and_update();
            match now {
                State::Up => return Ok(()),
                State::Severed => return Err(reset()),
                State::Partitioned => {}
            }
            if rx.changed().await.is_err() {
                return Err(reset());
            }
        }
    }

    /// Hangs until the world calms down or the link is severed; then the request fails.
    async fn hang(&self) -> BoxError {
        let (mut calm, mut state) = (self.calm.clone(), self.state.subscribe());
        tokio::select! {
            _ = calm.wait_for(|c| *c) => {}
            _ = state.wait_for(|s| *s == State::Severed) => {}
        }
        reset()
    }

    /// A kube client over this link to `router`, with the controller's production layers.
    pub fn client(&self, router: axum::Router) -> kube::Client {
        let faulty = Faulty { link: self.clone(), router };
        let service = ServiceBuilder::new().layer(metered::Layer).layer(deadline::Layer::new(REQUEST_TIMEOUT)).service(faulty);
        kube::Client::new(service, "default")
    }
}

/// A Status answer as the API server writes it.
fn status(code: u16) -> Response<Body> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = status.canonical_reason().unwrap_or("Error").replace(' ', "");
    let body = format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"injected {code}","reason":"{reason}","code":{code}}}"#
    );
    let mut res = Response::new(http_body_util::Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed_unsync());
    *res.status_mut() = status;
    res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    if code == 429 {
        res.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
    }
    res
}

/// The faulty service.
#[derive(Clone)]
struct Faulty {
    link: Link,
    router: axum::Router,
}

impl<B> Service<Request<B>> for Faulty
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let (link, mut router) = (self.link.clone(), self.router.clone());
        Box::pin(async move {
            link.passable().await?;
            let watching = deadline::is_watch(req.uri().query().unwrap_or(""));
            let key = format!("{} {}{}", req.method(), req.uri().path(), if watching { " watch" } else { "" });
            let (fault, short) = link.draw(&key, watching);
            let (req, patch) = Patch::read(req, link.journal.is_some()).await?;
            if let (Some(patch), Some(journal)) = (&patch, &link.journal)
                && !matches!(fault, Fault::None | Fault::Latency(_))
                && !patch.beat
            {
                journal.write_fault(&patch.name);
            }
            let landed = |res: &Response<axum::body::Body>| {
                if let (Some(patch), Some(journal)) = (&patch, &link.journal)
                    && res.status().is_success()
                {
                    for (token, json) in &patch.tokens {
                        journal.landed(&patch.name, token, *json);
                    }
                    for id in &patch.successes {
                        journal.succeeded(&patch.name, id);
                    }
                }
            };
            match fault {
                Fault::None => {}
                Fault::Latency(d) => tokio::time::sleep(d).await,
                Fault::Hang => return Err(link.hang().await),
                Fault::Status(code) => return Ok(status(code)),
                Fault::Reset => return Err(reset()),
                Fault::Lost => {
                    let res = router.call(req).await.map_err(|e| match e {})?;
                    landed(&res);
                    let _ = res.into_body().collect().await;
                    return Err(reset());
                }
            }
            link.passable().await?;
            let res = router.call(req).await.map_err(|e| match e {})?;
            landed(&res);
            let stall = if watching { link.stall(&key) } else { None };
            Ok(res.map(|body| guarded(body, link, short, stall)))
        })
    }
}

/// A PATCH of a simulated object, as the journal sees it: the object's name and the tokens
/// of the handlers' and daemons' patches it carries (see `SpanGuard::token`).
struct Patch {
    name: String,
    /// Each token, and whether it came in a JSON patch (`add /spec/items/-`) or a daemon's
    /// merge patch (`status.beat`).
    tokens: Vec<(String, bool)>,
    /// A daemon's patch (its faults do not make the object's writes' outcome unknown).
    beat: bool,
    /// The handlers whose success the patch writes (their progress records in
    /// `status.bosun.dev.progress`).
    successes: Vec<String>,
}

impl Patch {
    /// Reads the request's body when it is a PATCH of a simulated object (`journaling`), and
    /// gives the request back with the body read.
    async fn read<B>(req: Request<B>, journaling: bool) -> Result<(Request<axum::body::Body>, Option<Patch>), BoxError>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let name = req.uri().path().split("/kopfexamples/").nth(1).map(|rest| rest.split('/').next().unwrap_or(rest).to_string());
        let (Some(name), true, true) = (name, journaling, req.method() == http::Method::PATCH) else {
            return Ok((req.map(axum::body::Body::new), None));
        };
        let json = req.headers().get(http::header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"application/json-patch"));
        let (parts, body) = req.into_parts();
        let bytes = body.collect().await.map_err(Into::into)?.to_bytes();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let mut tokens = Vec::new();
        if json {
            for op in value.as_array().into_iter().flatten() {
                if op["op"] == "add"
                    && op["path"] == "/spec/items/-"
                    && let Some(t) = op["value"].as_str()
                {
                    tokens.push((t.to_string(), true));
                }
            }
        }
        let beat = value["status"]["beat"].as_str();
        if let Some(t) = beat {
            tokens.push((t.to_string(), false));
        }
        let mut successes = Vec::new();
        for (id, record) in value["status"]["bosun.dev"]["progress"].as_object().into_iter().flatten() {
            let record = match record {
                serde_json::Value::String(s) => serde_json::from_str(s).unwrap_or_default(),
                other => other.clone(),
            };
            if record["success"] == true {
                successes.push(id.clone());
            }
        }
        let patch = Patch { name, tokens, beat: beat.is_some(), successes };
        Ok((Request::from_parts(parts, axum::body::Body::from(bytes)), Some(patch)))
    }
}

/// A response body that hangs while the link is partitioned, fails once it is severed, and
/// (a shortened watch) ends at `short`, and (a stalled one) brings nothing in the window
/// `stall` (from, for) gives, unless the world calms down first.
fn guarded(body: axum::body::Body, link: Link, short: Option<Duration>, stall: Option<(Duration, Duration)>) -> Body {
    let now = tokio::time::Instant::now();
    let end_at = short.map(|d| now + d);
    let stall = stall.map(|(from, length)| (now + from, now + from + length));
    let state = link.state.subscribe();
    let calm = link.calm.clone();
    let stream = futures::stream::unfold(Some((body, state, calm)), move |st| async move {
        let (mut body, mut state, mut calm) = st?;
        loop {
            let now = tokio::time::Instant::now();
            if let Some((from, until)) = stall
                && now >= from
                && now < until
                && !*calm.borrow()
            {
                tokio::select! {
                    _ = tokio::time::sleep_until(until) => {}
                    _ = calm.wait_for(|c| *c) => {}
                    _ = state.wait_for(|s| *s == State::Severed) => return Some((Err(reset()), None)),
                }
            }
            let stalling = async {
                match stall {
                    Some((from, _)) if from > now => tokio::time::sleep_until(from).await,
                    _ => std::future::pending().await,
                }
            };
            let link_state = *state.borrow_and_update();
            match link_state {
                State::Severed => return Some((Err(reset()), None)),
                State::Partitioned => {
                    if state.changed().await.is_err() {
                        return Some((Err(reset()), None));
                    }
                    continue;
                }
                State::Up => {}
            }
            let ending = async {
                match end_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                frame = body.frame() => return match frame {
                    None => None,
                    Some(Ok(f)) => Some((Ok(f), Some((body, state, calm)))),
                    Some(Err(e)) => Some((Err(BoxError::from(e)), None)),
                },
                _ = state.changed() => continue,
                _ = stalling => continue,
                _ = ending => return None,
            }
        }
    });
    http_body_util::StreamBody::new(stream.boxed()).boxed_unsync()
}
