//! The rig of the runtime's tests: an in-memory API server and a scripted handler server
//! behind the two I/O traits, and a resource context with a router over them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bosun_proto::v1 as pb;
use futures::StreamExt as _;
use futures::future::BoxFuture;
use http::Method;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::cluster::discovery::ResolvedResource;
use crate::cluster::posting::{Poster, Posting};
use crate::cluster::{Api, Error};
use crate::handlers::dispatch::{CallFailure, DaemonStream, HandlerClient, Outages};
use crate::logs::Logger;
use crate::object;
use crate::runtime::context::{Clock, ResourceContext};
use crate::runtime::worker::Router;
use crate::state::essence::EssenceRules;
use crate::state::registry::Handler;
use crate::state::storage::{Storage, StorageKind};

pub const PATH: &str = "/apis/kopf.dev/v1/namespaces/ns/kopfexamples/obj";

/// An API server in memory: one object, merge and JSON patches, resourceVersions, 409 on a
/// stale resourceVersion, dry runs, and events kept for inspection.
#[derive(Default)]
pub struct FakeApi {
    pub object: Mutex<Option<Value>>,
    pub events: Mutex<Vec<Value>>,
    pub writes: Mutex<usize>,
    /// How long each PATCH waits before it is applied (a write retried through an outage).
    pub patch_takes: Mutex<Option<Duration>>,
    /// How many merge patches guarded by a resourceVersion are refused with 409 next, each
    /// after someone else's write (the object's resourceVersion moves on).
    pub conflicts: Mutex<usize>,
    /// Writes of the main resource (not `/status`) fail with 503 while set.
    pub main_writes_fail: std::sync::atomic::AtomicBool,
}

impl FakeApi {
    pub fn with(body: Value) -> Arc<FakeApi> {
        let api = FakeApi::default();
        *api.object.lock() = Some(body);
        Arc::new(api)
    }

    pub fn get_now(&self) -> Value {
        self.object.lock().clone().unwrap_or(Value::Null)
    }

    pub fn answer(&self, method: Method, path: &str, content_type: Option<&str>, body: Option<Vec<u8>>) -> Result<Value, Error> {
        let fail = |code: u16, message: &str| Error::Api {
            method: method.clone(),
            path: path.into(),
            code,
            reason: String::new(),
            message: message.into(),
        };
        let body: Value = body.map(|b| serde_json::from_slice(&b).unwrap()).unwrap_or(Value::Null);
        if method == Method::POST {
            self.events.lock().push(body.clone());
            return Ok(body);
        }
        if method == Method::PATCH && !path.contains("/status") && self.main_writes_fail.load(Ordering::SeqCst) {
            return Err(fail(503, "unavailable"));
        }
        let (path, dry) = match path.strip_suffix("?dryRun=All") {
            Some(p) => (p, true),
            None => (path, false),
        };
        let path = path.strip_suffix("/status").unwrap_or(path);
        let mut guard = self.object.lock();
        let name = guard.as_ref().and_then(|o| o["metadata"]["name"].as_str()).unwrap_or("obj").to_string();
        if path != PATH.replace("/obj", &format!("/{name}")) {
            return Err(fail(404, "not found"));
        }
        let Some(current) = guard.clone() else { return Err(fail(404, "not found")) };
        if method == Method::GET {
            return Ok(current);
        }
        let mut next = current.clone();
        match content_type {
            Some(crate::cluster::content::JSON_PATCH) => {
                let p: json_patch::Patch = serde_json::from_value(body).map_err(|e| fail(400, &e.to_string()))?;
                json_patch::patch(&mut next, &p).map_err(|e| fail(422, &e.to_string()))?;
            }
            _ => {
                if object::meta(&body, "resourceVersion").is_some() && *self.conflicts.lock() > 0 {
                    *self.conflicts.lock() -= 1;
                    let rv: u64 = current["metadata"]["resourceVersion"].as_str().unwrap_or("1").parse().unwrap_or(1);
                    if let Some(o) = guard.as_mut() {
                        o["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
                    }
                    return Err(fail(409, "the object has been modified"));
                }
                if let Some(rv) = object::meta(&body, "resourceVersion").and_then(Value::as_str)
                    && rv != current["metadata"]["resourceVersion"]
                {
                    return Err(fail(409, "the object has been modified"));
                }
                json_patch::merge(&mut next, &body);
            }
        }
        if next.pointer("/spec/forbidden").is_some() {
            return Err(fail(422, "spec.forbidden: Forbidden"));
        }
        if dry {
            return Ok(next);
        }
        let deleting = object::meta(&next, "deletionTimestamp").is_some();
        let no_finalizers = object::meta(&next, "finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty());
        *self.writes.lock() += 1;
        // The write that completes a deletion answers with the resourceVersion unchanged, as a
        // real kube-apiserver does (apiserver-golden, delete.json, "remove finalizer").
        if deleting && no_finalizers {
            *guard = None;
            return Ok(next);
        }
        let rv: u64 = current["metadata"]["resourceVersion"].as_str().unwrap_or("1").parse().unwrap_or(1);
        next["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
        *guard = Some(next.clone());
        Ok(next)
    }
}

impl Api for FakeApi {
    fn request<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        ct: Option<&'a str>,
        body: Option<Vec<u8>>,
    ) -> BoxFuture<'a, Result<Value, Error>> {
        Box::pin(async move {
            let takes = *self.patch_takes.lock();
            if let Some(takes) = takes.filter(|_| method == Method::PATCH) {
                tokio::time::sleep(takes).await;
            }
            self.answer(method, path, ct, body)
        })
    }
}

pub type Script = Box<dyn Fn(&pb::HandleRequest, usize) -> Result<pb::HandleResponse, CallFailure> + Send + Sync>;

/// Something done to the API server while a handler runs.
pub type Meanwhile = Box<dyn Fn(&FakeApi) + Send + Sync>;

/// Opens a daemon's stream, by the number of times it was started before.
pub type DaemonScript = Box<dyn Fn(usize) -> Result<DaemonStream, CallFailure> + Send + Sync>;

/// Answers an activity, by attempt number.
pub type ActivityScript = Box<dyn Fn(usize) -> Result<pb::ActivityResponse, CallFailure> + Send + Sync>;

/// Answers StopDaemon.
pub type StopScript = Box<dyn Fn(&pb::StopDaemonRequest) -> Result<pb::StopDaemonResponse, CallFailure> + Send + Sync>;

/// A handler server whose answers are scripted per handler id and call number.
pub struct FakeServer {
    pub scripts: HashMap<String, Script>,
    /// Done to the API server while a handler runs (by handler id).
    pub meanwhile: Mutex<HashMap<String, Meanwhile>>,
    /// How long a handler takes (by handler id).
    pub slow: Mutex<HashMap<String, Duration>>,
    pub daemons: Mutex<HashMap<String, DaemonScript>>,
    /// Whether a daemon's stream answers only with its first message, as grpcio, grpc-js and
    /// grpc-go send a server stream's headers (a silent daemon's call is never answered
    /// until it ends); else at once, as tonic does.
    pub headers_with_first_message: AtomicBool,
    /// StopDaemon's answers, by handler id (none: UNIMPLEMENTED, as a server without it).
    pub stops: Mutex<HashMap<String, StopScript>>,
    /// Every StopDaemon request, and when it came.
    pub stop_requests: Mutex<Vec<(pb::StopDaemonRequest, Instant)>>,
    pub activities: Mutex<HashMap<String, ActivityScript>>,
    /// Every call: the handler id and the object on the API server when it was called.
    pub calls: Mutex<Vec<(String, Value)>>,
    /// Every call of every kind: the handler id and the key it named.
    pub keys: Mutex<Vec<(String, String)>>,
    /// Every call: the handler id, the object it was sent, and when (tokio time).
    pub sent: Mutex<Vec<(String, Value, Instant)>>,
    /// When each daemon stream was opened and closed (by handler id).
    pub opened: Mutex<Vec<(String, Instant)>>,
    /// The uid of the object of each daemon opened.
    pub daemon_uids: Mutex<Vec<String>>,
    pub closed: Arc<Mutex<Vec<(String, Instant)>>>,
    /// Calls whose future was dropped before they answered (the server sees a cancelled
    /// RPC), by handler id, and when.
    pub cancelled: Arc<Mutex<Vec<(String, Instant)>>>,
    pub in_flight: AtomicUsize,
    pub most_in_flight: AtomicUsize,
    pub api: Arc<FakeApi>,
}

impl FakeServer {
    pub fn count(&self, id: &str) -> usize {
        self.calls.lock().iter().filter(|(i, _)| i == id).count()
    }

    /// When `id` was called, relative to its first call.
    pub fn schedule(&self, id: &str) -> Vec<Duration> {
        let times: Vec<Instant> = self.sent.lock().iter().filter(|(i, _, _)| i == id).map(|(_, _, t)| *t).collect();
        times.iter().map(|t| *t - times[0]).collect()
    }

    /// The objects `id` was sent.
    pub fn sent_to(&self, id: &str) -> Vec<Value> {
        self.sent.lock().iter().filter(|(i, _, _)| i == id).map(|(_, o, _)| o.clone()).collect()
    }

    pub fn times(list: &[(String, Instant)], id: &str) -> Vec<Instant> {
        list.iter().filter(|(i, _)| i == id).map(|(_, t)| *t).collect()
    }
}

/// A handler call in flight: dropped before it answers (`id` still set), it notes the
/// cancellation; either way it is no longer in flight.
struct Cancelled<'a> {
    id: Option<String>,
    to: Arc<Mutex<Vec<(String, Instant)>>>,
    in_flight: &'a AtomicUsize,
}

impl Drop for Cancelled<'_> {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some(id) = self.id.take() {
            self.to.lock().push((id, Instant::now()));
        }
    }
}

/// A daemon stream that stays open until it is dropped, when it notes the time in `closed`.
pub fn open_daemon(id: &str, closed: Arc<Mutex<Vec<(String, Instant)>>>) -> DaemonStream {
    struct Closing(String, Arc<Mutex<Vec<(String, Instant)>>>);
    impl Drop for Closing {
        fn drop(&mut self) {
            self.1.lock().push((self.0.clone(), Instant::now()));
        }
    }
    let guard = Closing(id.to_string(), closed);
    Box::pin(futures::stream::poll_fn(move |_| {
        let _ = &guard;
        std::task::Poll::Pending
    }))
}

/// A daemon's exit message.
pub fn exit(outcome: pb::Outcome, message: &str) -> pb::DaemonMessage {
    pb::DaemonMessage {
        message: Some(pb::daemon_message::Message::Exit(pb::DaemonExit {
            outcome: outcome as i32,
            message: message.into(),
            ..Default::default()
        })),
    }
}

/// A daemon stream that ends at once with this exit.
pub fn exiting_daemon(outcome: pb::Outcome, message: &str) -> DaemonStream {
    Box::pin(futures::stream::iter([Ok(exit(outcome, message))]))
}

/// A daemon stream that runs until `stopped` says so, then winds down for `takes`: it logs
/// `cleaning up` and exits with success (or, with `takes` `None`, never ends); its end (or its
/// cancellation) is noted in `closed`.
pub fn stoppable_daemon(
    id: &str,
    closed: Arc<Mutex<Vec<(String, Instant)>>>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
    takes: Option<Duration>,
) -> DaemonStream {
    let rest = open_daemon(id, closed);
    let wind_down = futures::stream::once(async move {
        let _ = stopped.wait_for(|s| *s).await;
        match takes {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
        let line = pb::LogLine { level: pb::log_line::Level::Info as i32, message: "cleaning up".into() };
        futures::stream::iter([
            Ok(pb::DaemonMessage { message: Some(pb::daemon_message::Message::Log(line)) }),
            Ok(exit(pb::Outcome::Success, "")),
        ])
    })
    .flatten();
    // The guard in `rest` is dropped with the stream, after its exit or when cancelled.
    Box::pin(futures::StreamExt::chain(wind_down, rest))
}

/// A StopDaemon that says the daemon is stopping and tells its stream through `stopped`.
pub fn stopping(stopped: tokio::sync::watch::Sender<bool>) -> StopScript {
    Box::new(move |_| {
        stopped.send_replace(true);
        Ok(pb::StopDaemonResponse { stopping: true })
    })
}

impl HandlerClient for FakeServer {
    fn addr(&self) -> &str {
        "fake://handlers"
    }

    fn handle(&self, req: pb::HandleRequest, _deadline: Duration) -> BoxFuture<'_, Result<pb::HandleResponse, CallFailure>> {
        Box::pin(async move {
            let n = self.count(&req.handler_id);
            self.keys.lock().push((req.handler_id.clone(), req.handler_key.clone()));
            // What the object looks like on the server while the handler runs.
            self.calls.lock().push((req.handler_id.clone(), self.api.get_now()));
            let sent = serde_json::from_slice(&req.object).unwrap_or(Value::Null);
            self.sent.lock().push((req.handler_id.clone(), sent, Instant::now()));
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_in_flight.fetch_max(now, Ordering::SeqCst);
            // Noted as cancelled if the call's future is dropped before it answers.
            let mut call = Cancelled { id: Some(req.handler_id.clone()), to: self.cancelled.clone(), in_flight: &self.in_flight };
            if let Some(f) = self.meanwhile.lock().get(&req.handler_id) {
                f(&self.api);
            }
            let slow = self.slow.lock().get(&req.handler_id).copied();
            if let Some(d) = slow {
                tokio::time::sleep(d).await;
            }
            call.id = None;
            drop(call);
            let script = self.scripts.get(&req.handler_id).expect("scripted handler");
            script(&req, n)
        })
    }

    fn daemon(&self, req: pb::DaemonRequest) -> BoxFuture<'_, Result<DaemonStream, CallFailure>> {
        Box::pin(async move {
            let n = FakeServer::times(&self.opened.lock(), &req.handler_id).len();
            self.keys.lock().push((req.handler_id.clone(), req.handler_key.clone()));
            self.opened.lock().push((req.handler_id.clone(), Instant::now()));
            let object: Value = serde_json::from_slice(&req.object).unwrap_or_default();
            self.daemon_uids.lock().push(object::meta_str(&object, "uid").to_string());
            let mut stream = match self.daemons.lock().get(&req.handler_id) {
                Some(script) => script(n)?,
                None => return Err(CallFailure::Unreachable("no such daemon".into())),
            };
            if !self.headers_with_first_message.load(Ordering::SeqCst) {
                return Ok(stream);
            }
            let first = stream.next().await;
            Ok(Box::pin(futures::stream::iter(first).chain(stream)) as DaemonStream)
        })
    }

    fn admit(&self, _req: pb::AdmitRequest, _d: Duration) -> BoxFuture<'_, Result<pb::AdmitResponse, CallFailure>> {
        Box::pin(async { Err(CallFailure::Unreachable("the fake server reviews nothing".into())) })
    }

    fn stop_daemon(&self, req: pb::StopDaemonRequest, _d: Duration) -> BoxFuture<'_, Result<pb::StopDaemonResponse, CallFailure>> {
        Box::pin(async move {
            self.stop_requests.lock().push((req.clone(), Instant::now()));
            match self.stops.lock().get(&req.handler_id) {
                Some(script) => script(&req),
                None => Err(CallFailure::Failed { code: tonic::Code::Unimplemented, message: String::new() }),
            }
        })
    }

    fn activity(&self, req: pb::ActivityRequest, _d: Duration) -> BoxFuture<'_, Result<pb::ActivityResponse, CallFailure>> {
        Box::pin(async move {
            let n = self.sent.lock().iter().filter(|(i, _, _)| *i == req.handler_id).count();
            self.keys.lock().push((req.handler_id.clone(), req.handler_key.clone()));
            self.sent.lock().push((req.handler_id.clone(), Value::Null, Instant::now()));
            match self.activities.lock().get(&req.handler_id) {
                Some(script) => script(n),
                None => Err(CallFailure::Unreachable("no such activity".into())),
            }
        })
    }
}

pub fn ok() -> Result<pb::HandleResponse, CallFailure> {
    Ok(pb::HandleResponse { outcome: pb::Outcome::Success as i32, ..Default::default() })
}

pub fn handler(id: &str, kind: pb::HandlerKind, options: pb::HandlerOptions) -> Arc<Handler> {
    handler_with(id, kind, options, |_| {})
}

pub fn handler_with(id: &str, kind: pb::HandlerKind, options: pb::HandlerOptions, f: impl FnOnce(&mut pb::HandlerSpec)) -> Arc<Handler> {
    let mut spec = pb::HandlerSpec {
        id: id.into(),
        kind: kind as i32,
        resource: Some(pb::ResourceSelector { name: "kopfexamples".into(), ..Default::default() }),
        options: Some(options),
        ..Default::default()
    };
    f(&mut spec);
    Arc::new(Handler::from_spec(&spec, 0).unwrap())
}

pub fn timer(id: &str, options: pb::TimerOptions) -> Arc<Handler> {
    handler_with(id, pb::HandlerKind::Timer, Default::default(), |s| s.timer = Some(options))
}

pub fn daemon(id: &str, options: pb::DaemonOptions, handler_options: pb::HandlerOptions) -> Arc<Handler> {
    handler_with(id, pb::HandlerKind::Daemon, handler_options, |s| s.daemon = Some(options))
}

/// An object that already carries the finalizer (timers and daemons start only then).
pub fn finalized() -> Value {
    object(json!({"metadata": {"finalizers": ["bosun.dev/finalizer"]}}))
}

pub fn object(extra: Value) -> Value {
    let mut b = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": "obj", "namespace": "ns", "uid": "u1", "resourceVersion": "1"}, "spec": {"a": 1}});
    json_patch::merge(&mut b, &extra);
    b
}

pub struct Rig {
    pub api: Arc<FakeApi>,
    pub server: Arc<FakeServer>,
    pub router: Router,
    pub ctx: Arc<ResourceContext>,
    pub lines: Arc<Mutex<Vec<String>>>,
    pub outages: Arc<Outages>,
    pub _stop: tokio::sync::watch::Sender<bool>,
}

pub fn rig(body: Value, handlers: Vec<Arc<Handler>>, scripts: Vec<(&str, Script)>) -> Rig {
    rig_posting(body, handlers, scripts, Posting::default())
}

/// [`rig`], posting events as `posting` says.
pub fn rig_posting(body: Value, handlers: Vec<Arc<Handler>>, scripts: Vec<(&str, Script)>, posting: Posting) -> Rig {
    rig_with(body, handlers, scripts, posting, Arc::new(Outages::default()))
}

/// [`rig`], noting the server's outages in `outages`, which other rigs may share: their
/// objects wait for the same server.
pub fn rig_sharing(body: Value, handlers: Vec<Arc<Handler>>, scripts: Vec<(&str, Script)>, outages: Arc<Outages>) -> Rig {
    rig_with(body, handlers, scripts, Posting::default(), outages)
}

fn rig_with(body: Value, handlers: Vec<Arc<Handler>>, scripts: Vec<(&str, Script)>, posting: Posting, outages: Arc<Outages>) -> Rig {
    let api = FakeApi::with(body);
    let server = Arc::new(FakeServer {
        scripts: scripts.into_iter().map(|(id, s)| (id.to_string(), s)).collect(),
        calls: Mutex::default(),
        keys: Mutex::default(),
        meanwhile: Mutex::default(),
        slow: Mutex::default(),
        daemons: Mutex::default(),
        headers_with_first_message: AtomicBool::new(false),
        stops: Mutex::default(),
        stop_requests: Mutex::default(),
        daemon_uids: Mutex::default(),
        activities: Mutex::default(),
        sent: Mutex::default(),
        opened: Mutex::default(),
        closed: Arc::default(),
        cancelled: Arc::default(),
        in_flight: AtomicUsize::new(0),
        most_in_flight: AtomicUsize::new(0),
        api: api.clone(),
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = lines.clone();
    tokio::spawn(async move {
        while let Some(l) = rx.recv().await {
            sink.lock().push(l);
        }
    });
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let log = Logger::new(Some(crate::LogSink(tx)));
    let tasks = TaskTracker::new();
    let ctx = Arc::new(ResourceContext {
        resource: ResolvedResource {
            group: "kopf.dev".into(),
            version: "v1".into(),
            plural: "kopfexamples".into(),
            kind: "KopfExample".into(),
            namespaced: true,
            has_status: true,
            status_keeps_unknown: true,
        },
        handlers: handlers.iter().filter(|h| !matches!(h.kind, pb::HandlerKind::Index | pb::HandlerKind::Event)).cloned().collect(),
        spies: handlers.iter().filter(|h| h.kind == pb::HandlerKind::Event).cloned().collect(),
        indexers: handlers.iter().filter(|h| h.kind == pb::HandlerKind::Index).cloned().collect(),
        gate: Arc::default(),
        storage: Storage::bosun("bosun.dev", StorageKind::Status),
        rules: EssenceRules { own_prefixes: vec!["bosun.dev/".into()], ..Default::default() },
        api: api.clone(),
        servers: Arc::new(vec![server.clone() as Arc<dyn HandlerClient>]),
        outages: outages.clone(),
        kinds: Arc::default(),
        posting,
        poster: Poster::start(api.clone(), log.clone(), &tasks),
        log,
        authority: crate::coordination::Authority::default(),
        selector_pushed: false,
        seen: Arc::default(),
        memos: Arc::default(),
        tasks,
        stop: stop.clone(),
        clock: Clock::tokio(),
    });
    let router = Router::new(ctx.clone(), Arc::new(Semaphore::new(8)), TaskTracker::new(), stop);
    Rig { api, server, router, ctx, lines, outages, _stop: stop_tx }
}

impl Rig {
    /// Lets the paused clock run until `cond` holds (at most `limit` of virtual time).
    pub async fn until(&self, what: &str, limit: Duration, cond: impl Fn(&Rig) -> bool) {
        let deadline = tokio::time::Instant::now() + limit;
        while !cond(self) {
            assert!(tokio::time::Instant::now() < deadline, "{what}: not within {limit:?}; log: {:#?}", self.lines.lock());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn logged(&self, text: &str) -> usize {
        self.lines.lock().iter().filter(|l| l.contains(text)).count()
    }

    /// Changes the object on the API server (a new resourceVersion) and returns it, as its
    /// watch event would.
    pub fn change(&self, f: impl FnOnce(&mut Value)) -> Value {
        let mut guard = self.api.object.lock();
        let o = guard.as_mut().expect("the object exists");
        f(o);
        let rv: u64 = o["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        o["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
        o.clone()
    }
}
