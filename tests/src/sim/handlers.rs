//! The scripted handler server of each replica (its sidecar), served in-process on the
//! controller's `mem://NAME` transport: create, update and delete handlers, a timer and a
//! daemon on the simulated resource, each recording a [`Span`](super::journal::Span) server side.
//! The second create handler returns a JSON patch, the update handler a merge patch, and two
//! daemons in three patch their status every 2 s, each patch with a token of its own (see
//! `SpanGuard::token`), so that the API side can tell which call or daemon sent what landed.
//! Two daemons in three answer their call only with their first message, as the servers users
//! run do (grpcio, grpc-js, grpc-go), half of those sending nothing before their exit; the
//! others at once, as tonic does.
//!
//! Faults from the server's seeded RNG while the world is not calm: slow handlers (1–5 s),
//! stalled ones (5–20 s), and daemons that take up to 1 s to end once asked to stop (a daemon
//! that checks its stop flag now and then, as Kopf's threaded daemons do). Daemons follow the
//! contract as the SDKs do: `StopDaemon` sets their stop flag, and their stream's last message
//! is a `DaemonExit` sent once they have ended; a cancelled stream ends them after the same
//! lag. The lag stays within the Lease's margin (a third of its duration): a daemon that
//! outlives that margin after a revocation may overlap its next owner, which the README states
//! as a limit, not a fault of the controller. A crash stops the server at once: its
//! connections reset, new ones refused, the futures in flight dropped.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bosun_proto::v1 as pb;
use pb::handler_server_server::{HandlerServer, HandlerServerServer};
use rand::Rng;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::journal::{Journal, What};

/// Tells whether the object (namespace, name, uid) is still in the store.
pub type Exists = Arc<dyn Fn(&str, &str, &str) -> bool + Send + Sync>;

/// The resource every handler is on.
fn selector() -> pb::ResourceSelector {
    pb::ResourceSelector { group: "kopf.dev".into(), version: "v1".into(), name: "kopfexamples".into() }
}

fn spec(id: &str, kind: pb::HandlerKind) -> pb::HandlerSpec {
    pb::HandlerSpec {
        id: id.into(),
        kind: kind as i32,
        resource: Some(selector()),
        options: Some(pb::HandlerOptions { backoff_seconds: Some(1.0), ..Default::default() }),
        ..Default::default()
    }
}

/// The handlers the server registers; `changed`: a start of the server whose registry has
/// changed since (it registers one handler more).
pub fn specs(changed: bool) -> Vec<pb::HandlerSpec> {
    let mut timer = spec("tick", pb::HandlerKind::Timer);
    timer.timer = Some(pb::TimerOptions { interval_seconds: 3.0, ..Default::default() });
    let mut daemon = spec("beat", pb::HandlerKind::Daemon);
    daemon.daemon = Some(pb::DaemonOptions { backoff_seconds: 1.0, ..Default::default() });
    vec![
        spec("on_create", pb::HandlerKind::Create),
        // A second handler of the cause: Kopf's order (each outcome written before the next
        // handler runs) is what invariant (f) checks.
        spec("on_create_2", pb::HandlerKind::Create),
        spec("on_update", pb::HandlerKind::Update),
        spec("on_delete", pb::HandlerKind::Delete),
        timer,
        daemon,
    ]
    .into_iter()
    .chain(changed.then(|| spec("on_update_2", pb::HandlerKind::Update)))
    .collect()
}

/// One replica incarnation's handler server.
#[derive(Clone)]
struct Script {
    replica: String,
    journal: Journal,
    exists: Exists,
    draws: Arc<super::Draws>,
    calm: watch::Receiver<bool>,
    /// Never slow or stalled.
    steady: bool,
    /// Cancelled daemons end at once.
    prompt: bool,
    /// Cancelled when this start of the server crashes: its daemons end at once then.
    crashed: CancellationToken,
    /// Registers one handler more (the server was started again with its registry changed).
    changed: bool,
    /// The stop flags of the daemons running, by object uid.
    running: Arc<std::sync::Mutex<std::collections::HashMap<String, (u64, CancellationToken)>>>,
}

impl Script {
    /// The object's (namespace, name, uid) from a request's JSON.
    fn object(bytes: &[u8]) -> (String, String, String) {
        let v: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
        let m = &v["metadata"];
        let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
        (s("namespace"), s("name"), s("uid"))
    }

    /// How long a call takes: quick, slow, or stalled.
    fn duration(&self, key: &str) -> Duration {
        let mut rng = self.draws.rng(key);
        let calm = *self.calm.borrow() || self.steady;
        let x: f64 = rng.random();
        let ms = if !calm && x < 0.03 {
            rng.random_range(5_000..20_000)
        } else if !calm && x < 0.15 {
            rng.random_range(1_000..5_000)
        } else {
            rng.random_range(10..200)
        };
        Duration::from_millis(ms)
    }

    /// How long a cancelled daemon takes to end.
    fn exit_lag(&self, key: &str) -> Duration {
        let mut rng = self.draws.rng(key);
        let lag = rng.random_range(100..1_000);
        if self.prompt || rng.random_bool(0.5) { Duration::ZERO } else { Duration::from_millis(lag) }
    }
}

type Answer<T> = Result<tonic::Response<T>, tonic::Status>;
type DaemonStream = Pin<Box<dyn futures::Stream<Item = Result<pb::DaemonMessage, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl HandlerServer for Script {
    async fn describe(&self, _: tonic::Request<pb::DescribeRequest>) -> Answer<pb::DescribeResponse> {
        Ok(tonic::Response::new(pb::DescribeResponse { handlers: specs(self.changed), server_name: "sim".into(), ..Default::default() }))
    }

    async fn handle(&self, req: tonic::Request<pb::HandleRequest>) -> Answer<pb::HandleResponse> {
        let req = req.into_inner();
        let (ns, name, uid) = Script::object(&req.object);
        let gone = !(self.exists)(&ns, &name, &uid);
        let span = self.journal.open(&self.replica, &uid, &name, What::Call(req.handler_id.clone()), gone);
        tokio::time::sleep(self.duration(&format!("{} {name}", req.handler_id))).await;
        // The second create handler returns a JSON patch that must land once (invariant g);
        // the update handler a merge patch of the status, which may land twice.
        let mut answer = pb::HandleResponse { outcome: pb::Outcome::Success as i32, ..Default::default() };
        match req.handler_id.as_str() {
            "on_create_2" => {
                let op = serde_json::json!([{"op": "add", "path": "/spec/items/-", "value": span.token(&name, 0)}]);
                answer.json_patch = serde_json::to_vec(&op).unwrap_or_default();
            }
            "on_update" => {
                let patch = serde_json::json!({"status": {"updated": span.token(&name, 0)}});
                answer.merge_patch = serde_json::to_vec(&patch).unwrap_or_default();
            }
            _ => {}
        }
        span.finish(true);
        Ok(tonic::Response::new(answer))
    }

    type DaemonStream = DaemonStream;
    type HandleStreamStream = futures::stream::Empty<Result<pb::HandleAnswers, tonic::Status>>;

    /// Not served: the controller calls Handle one by one (unary tonic calls are cheap).
    async fn handle_stream(
        &self,
        _: tonic::Request<tonic::Streaming<pb::HandleCalls>>,
    ) -> Result<tonic::Response<Self::HandleStreamStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("this server answers Handle calls one by one"))
    }

    async fn daemon(&self, req: tonic::Request<pb::DaemonRequest>) -> Answer<Self::DaemonStream> {
        let req = req.into_inner();
        let (ns, name, uid) = Script::object(&req.object);
        let gone = !(self.exists)(&ns, &name, &uid);
        let mut span = self.journal.open(&self.replica, &uid, &name, What::Daemon, gone);
        let lag = self.exit_lag(&format!("daemon {name}"));
        span.lag = lag;
        let stop = CancellationToken::new();
        static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let start = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.running.lock().unwrap().insert(uid.clone(), (start, stop.clone()));
        // A third of the daemons are served as tonic serves them (the stream's headers at
        // once) and patch their status every 2 s; the others as grpcio, grpc-js and grpc-go
        // serve them (the headers go with the first message), half of those silent (their
        // first message is their exit: the controller sees nothing of the call until it has
        // ended), half patching (invariant h: no patch lands after the daemon's turn).
        let class = self.draws.rng(&format!("headers {name}")).random_range(0..3);
        let (late_headers, beats) = (class > 0, class != 1);
        let run =
            DaemonRun { span: Some(span), crashed: self.crashed.clone(), running: self.running.clone(), uid, start, stop, beats: 0, name };
        // Runs until asked to stop (then ends after its lag and says so in its last message),
        // or until its stream is dropped (cancelled, or the connection is gone).
        let stream = futures::stream::unfold(Some(run), move |run| async move {
            let mut run = run?;
            let beat = async {
                match beats {
                    true => tokio::time::sleep(BEAT).await,
                    false => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = run.stop.cancelled() => {}
                _ = beat => {
                    run.beats += 1;
                    let token = run.span.as_ref().map(|s| s.token(&run.name, run.beats)).unwrap_or_default();
                    let patch = serde_json::to_vec(&serde_json::json!({"status": {"beat": token}})).unwrap_or_default();
                    return Some((Ok(pb::DaemonMessage { message: Some(pb::daemon_message::Message::MergePatch(patch)) }), Some(run)));
                }
            }
            tokio::time::sleep(lag).await;
            if let Some(mut span) = run.span.take() {
                span.lag = Duration::ZERO;
            }
            let exit = pb::DaemonExit { outcome: pb::Outcome::Success as i32, stopped: true, ..Default::default() };
            Some((Ok(pb::DaemonMessage { message: Some(pb::daemon_message::Message::Exit(exit)) }), None))
        });
        if late_headers {
            let mut stream = Box::pin(stream);
            let first = futures::StreamExt::next(&mut stream).await;
            return Ok(tonic::Response::new(Box::pin(futures::StreamExt::chain(futures::stream::iter(first), stream))));
        }
        Ok(tonic::Response::new(Box::pin(stream)))
    }

    async fn activity(&self, _: tonic::Request<pb::ActivityRequest>) -> Answer<pb::ActivityResponse> {
        Err(tonic::Status::not_found("no activities here"))
    }

    async fn admit(&self, _: tonic::Request<pb::AdmitRequest>) -> Answer<pb::AdmitResponse> {
        Err(tonic::Status::unimplemented("no admission here"))
    }

    async fn stop_daemon(&self, req: tonic::Request<pb::StopDaemonRequest>) -> Answer<pb::StopDaemonResponse> {
        let stop = self.running.lock().unwrap().get(&req.into_inner().uid).map(|(_, stop)| stop.clone());
        if let Some(stop) = &stop {
            stop.cancel();
        }
        Ok(tonic::Response::new(pb::StopDaemonResponse { stopping: stop.is_some() }))
    }
}

/// A running daemon: it ends after its exit lag once cancelled, at once when its server
/// crashed (the process is gone, and its threads with it).
struct DaemonRun {
    span: Option<super::journal::SpanGuard>,
    crashed: CancellationToken,
    running: Arc<std::sync::Mutex<std::collections::HashMap<String, (u64, CancellationToken)>>>,
    uid: String,
    /// Which start of a daemon it is (the map keeps the newest's flag).
    start: u64,
    /// Its stop flag.
    stop: CancellationToken,
    /// How many patches it has sent.
    beats: u64,
    /// Its object's name.
    name: String,
}

/// How often a patching daemon patches its object's status.
const BEAT: Duration = Duration::from_secs(2);

impl Drop for DaemonRun {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap();
        if running.get(&self.uid).is_some_and(|(start, _)| *start == self.start) {
            running.remove(&self.uid);
        }
        drop(running);
        if let Some(mut span) = self.span.take() {
            if self.crashed.is_cancelled() {
                span.lag = Duration::ZERO;
            }
            drop(span);
        }
    }
}

/// A connection that fails (reads and writes reset) once its server crashes.
struct Severable {
    inner: DuplexStream,
    crashed: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl Severable {
    fn check(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        match self.crashed.as_mut().poll(cx) {
            Poll::Ready(()) => Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "the handler server crashed")),
            Poll::Pending => Ok(()),
        }
    }
}

impl AsyncRead for Severable {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Severable {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Severable {
    type ConnectInfo = ();

    fn connect_info(&self) {}
}

/// A running (or crashed) handler server at `mem://name`.
pub struct Host {
    name: String,
    script: Script,
    crash: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Host {
    /// A server for replica incarnation `replica` at `mem://name`, not started.
    pub fn new(name: &str, replica: &str, seed: u64, journal: Journal, exists: Exists, calm: watch::Receiver<bool>) -> Host {
        let script = Script {
            replica: replica.into(),
            journal,
            exists,
            draws: Arc::new(super::Draws::new(seed)),
            calm,
            steady: false,
            prompt: false,
            crashed: CancellationToken::new(),
            changed: false,
            running: Arc::default(),
        };
        Host { name: name.into(), script, crash: CancellationToken::new(), task: None }
    }

    /// Leaves out slow and stalled handlers (`steady`) and daemons' exit lag (`prompt`).
    pub fn without(&mut self, steady: bool, prompt: bool) {
        (self.script.steady, self.script.prompt) = (steady, prompt);
    }

    /// The address the controller is given.
    pub fn addr(&self) -> String {
        format!("mem://{}", self.name)
    }

    /// Whether it serves now.
    pub fn is_up(&self) -> bool {
        self.task.is_some()
    }

    /// Starts serving (again).
    pub async fn start(&mut self) {
        if self.task.is_some() {
            return;
        }
        self.crash = CancellationToken::new();
        self.script.crashed = self.crash.clone();
        let conns = bosun_controller::handlers::memory::listen(&self.name);
        let crash = self.crash.clone();
        let incoming = futures::StreamExt::map(tokio_stream::wrappers::UnboundedReceiverStream::new(conns), move |inner| {
            Ok::<_, std::io::Error>(Severable { inner, crashed: Box::pin(crash.clone().cancelled_owned()) })
        });
        let (reporter, health) = tonic_health::server::health_reporter();
        reporter.set_service_status("", tonic_health::ServingStatus::Serving).await;
        let server = tonic::transport::Server::builder().add_service(health).add_service(HandlerServerServer::new(self.script.clone()));
        self.task = Some(tokio::spawn(async move {
            let _ = server.serve_with_incoming(incoming).await;
        }));
    }

    /// Starts it again at once with its registry changed (one handler more, or one less than
    /// the last time), as a handler server deployed anew: the controller serves the resource
    /// anew, and the cycles and daemons from before must end first.
    pub async fn restart_changed(&mut self) {
        self.crash();
        self.script.changed = !self.script.changed;
        self.start().await;
    }

    /// Crashes it: connections reset, new ones refused, the calls in flight dropped.
    pub fn crash(&mut self) {
        bosun_controller::handlers::memory::close(&self.name);
        self.crash.cancel();
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.crash();
    }
}
