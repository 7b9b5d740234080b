//! End-to-end test support: a scripted handler server speaking the real `bosun.v1` gRPC
//! contract (so the controller's failure handling can be driven precisely), and an
//! environment that runs the dev cluster, the controller and handler servers in-process
//! over real HTTP and real gRPC; and the harness of the contract conformance suite.

/// jemalloc where the tests are built for musl (`./x test`): musl's malloc is slow for the
/// simulation's many small allocations.
#[cfg(target_env = "musl")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

pub mod conformance;
pub mod faults;
pub mod record;
pub mod sim;
pub mod tools;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bosun_proto::v1 as pb;
use pb::handler_server_server::{HandlerServer, HandlerServerServer};
use serde_json::Value;
use tokio::sync::mpsc;

/// What a scripted handler does on one call.
pub type Behaviour = Arc<dyn Fn(&pb::HandleRequest) -> pb::HandleResponse + Send + Sync>;

/// A handler server whose answers are scripted per handler id.
#[derive(Clone)]
pub struct Scripted {
    daemons: Arc<HashMap<String, DaemonScript>>,
    /// Daemon streams open right now.
    pub open_daemons: Arc<std::sync::atomic::AtomicUsize>,
    specs: Vec<pb::HandlerSpec>,
    resources: Vec<pb::ResourceSettings>,
    finishes_parents: bool,
    /// Operator settings that startup activities answer with, by id.
    startup_settings: Arc<HashMap<String, pb::OperatorSettings>>,
    /// Operator settings held when described.
    settings: Option<pb::OperatorSettings>,
    behaviours: Arc<HashMap<String, Behaviour>>,
    calls: Arc<Mutex<Vec<pb::HandleRequest>>>,
}

/// A success answer with a JSON result.
pub fn success(result: Value) -> pb::HandleResponse {
    pb::HandleResponse { outcome: pb::Outcome::Success as i32, result: serde_json::to_vec(&result).unwrap(), ..Default::default() }
}

/// What a scripted daemon sends when started; the stream then stays open until cancelled,
/// unless the last message is an exit.
pub type DaemonScript = Arc<dyn Fn(&pb::DaemonRequest) -> Vec<pb::DaemonMessage> + Send + Sync>;

/// Counts an open daemon stream while it lives.
struct OpenGuard(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A behaviour that always succeeds with `result`.
pub fn succeed(result: Value) -> Behaviour {
    Arc::new(move |_| success(result.clone()))
}

/// A handler spec on the KopfExample resource.
pub fn spec(id: &str, kind: pb::HandlerKind) -> pb::HandlerSpec {
    pb::HandlerSpec {
        id: id.into(),
        kind: kind as i32,
        resource: Some(pb::ResourceSelector { group: "kopf.dev".into(), version: "v1".into(), name: "kopfexamples".into() }),
        ..Default::default()
    }
}

impl Scripted {
    /// A server with these handlers and behaviours.
    pub fn new(handlers: Vec<(pb::HandlerSpec, Behaviour)>) -> Scripted {
        let specs = handlers.iter().map(|(s, _)| s.clone()).collect();
        let behaviours = handlers.into_iter().map(|(s, b)| (s.id, b)).collect();
        Scripted {
            daemons: Arc::default(),
            open_daemons: Arc::default(),
            specs,
            resources: Vec::new(),
            finishes_parents: false,
            startup_settings: Arc::default(),
            settings: None,
            behaviours: Arc::new(behaviours),
            calls: Arc::default(),
        }
    }

    /// Registers a daemon handler with its script.
    pub fn with_daemon(mut self, spec: pb::HandlerSpec, script: DaemonScript) -> Scripted {
        Arc::make_mut(&mut self.daemons).insert(spec.id.clone(), script);
        self.specs.push(spec);
        self
    }

    /// Declares per-resource settings (ignored fields) in Describe.
    pub fn with_resource_settings(mut self, settings: pb::ResourceSettings) -> Scripted {
        self.resources.push(settings);
        self
    }

    /// Says in Describe that the server finishes parents (`finishes_parents`).
    pub fn finishing_parents(mut self) -> Scripted {
        self.finishes_parents = true;
        self
    }

    /// Says in Describe that the server holds these operator settings (Kopf's
    /// `kopf.operator(settings=…)`).
    pub fn holding_settings(mut self, settings: pb::OperatorSettings) -> Scripted {
        self.settings = Some(settings);
        self
    }

    /// Answers the startup activity `id`, when it succeeds, with these operator settings.
    pub fn with_startup_settings(mut self, id: &str, settings: pb::OperatorSettings) -> Scripted {
        Arc::make_mut(&mut self.startup_settings).insert(id.to_string(), settings);
        self
    }

    /// Also answers calls for `id` without registering it (sub-handlers `parent/child`).
    pub fn also(mut self, id: &str, behaviour: Behaviour) -> Scripted {
        Arc::make_mut(&mut self.behaviours).insert(id.to_string(), behaviour);
        self
    }

    /// Every Handle request received so far.
    pub fn calls(&self) -> Vec<pb::HandleRequest> {
        self.calls.lock().unwrap().clone()
    }

    /// How many times handler `id` was called.
    pub fn count(&self, id: &str) -> usize {
        self.calls.lock().unwrap().iter().filter(|c| c.handler_id == id).count()
    }

    /// Serves on `listener` until `shutdown` resolves, with gRPC health SERVING.
    pub async fn serve(self, listener: tokio::net::TcpListener, shutdown: impl Future<Output = ()> + Send + 'static) {
        let (reporter, health) = tonic_health::server::health_reporter();
        reporter.set_service_status("", tonic_health::ServingStatus::Serving).await;
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let _ = tonic::transport::Server::builder()
            .add_service(health)
            .add_service(HandlerServerServer::new(self))
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await;
    }

    /// Serves on 127.0.0.1:0 in the background; returns the address and a stopper.
    pub async fn spawn(self) -> (String, Stopper) {
        self.spawn_on(std::net::TcpListener::bind("127.0.0.1:0").unwrap()).await
    }

    /// Serves on a listener the caller bound, in the background.
    pub async fn spawn_on(self, listener: std::net::TcpListener) -> (String, Stopper) {
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(self.serve(listener, async move {
            let _ = rx.await;
        }));
        (addr, Stopper { tx: Some(tx), task: Some(task) })
    }
}

/// Stops a background server.
pub struct Stopper {
    tx: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Stopper {
    /// Stops it and waits.
    pub async fn stop(mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

type Answer<T> = Result<tonic::Response<T>, tonic::Status>;
type DaemonStream = Pin<Box<dyn futures::Stream<Item = Result<pb::DaemonMessage, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl HandlerServer for Scripted {
    async fn describe(&self, _: tonic::Request<pb::DescribeRequest>) -> Answer<pb::DescribeResponse> {
        Ok(tonic::Response::new(pb::DescribeResponse {
            handlers: self.specs.clone(),
            server_name: "scripted".into(),
            resources: self.resources.clone(),
            finishes_parents: self.finishes_parents,
            settings: self.settings.clone(),
            handle_stream: false,
        }))
    }

    async fn handle(&self, req: tonic::Request<pb::HandleRequest>) -> Answer<pb::HandleResponse> {
        let req = req.into_inner();
        self.calls.lock().unwrap().push(req.clone());
        match self.behaviours.get(&req.handler_id) {
            Some(b) => Ok(tonic::Response::new(b(&req))),
            None => Err(tonic::Status::not_found(format!("no handler '{}'", req.handler_id))),
        }
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
        let Some(script) = self.daemons.get(&req.handler_id) else {
            return Err(tonic::Status::not_found(format!("no daemon '{}'", req.handler_id)));
        };
        let messages = script(&req);
        let ends = matches!(messages.last().and_then(|m| m.message.as_ref()), Some(pb::daemon_message::Message::Exit(_)));
        self.open_daemons.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let guard = OpenGuard(self.open_daemons.clone());
        let head = futures::stream::iter(messages.into_iter().map(Ok));
        let tail = futures::stream::unfold((guard, ends), |(guard, ends)| async move {
            if ends {
                drop(guard);
                return None;
            }
            std::future::pending::<()>().await;
            Some((Ok(pb::DaemonMessage::default()), (guard, ends)))
        });
        Ok(tonic::Response::new(Box::pin(futures::StreamExt::chain(head, tail))))
    }

    async fn activity(&self, req: tonic::Request<pb::ActivityRequest>) -> Answer<pb::ActivityResponse> {
        let req = req.into_inner();
        let as_handle = pb::HandleRequest { handler_id: req.handler_id.clone(), retry: req.retry, ..Default::default() };
        self.calls.lock().unwrap().push(as_handle.clone());
        let Some(b) = self.behaviours.get(&req.handler_id) else {
            return Err(tonic::Status::not_found(format!("no activity '{}'", req.handler_id)));
        };
        let a = b(&as_handle);
        Ok(tonic::Response::new(pb::ActivityResponse {
            outcome: a.outcome,
            message: a.message,
            delay_seconds: a.delay_seconds,
            result: a.result,
            logs: a.logs,
            settings: self.startup_settings.get(&req.handler_id).cloned().filter(|_| a.outcome == pb::Outcome::Success as i32),
        }))
    }

    async fn admit(&self, _: tonic::Request<pb::AdmitRequest>) -> Answer<pb::AdmitResponse> {
        Err(tonic::Status::unimplemented("no admission here"))
    }

    async fn stop_daemon(&self, _: tonic::Request<pb::StopDaemonRequest>) -> Answer<pb::StopDaemonResponse> {
        Err(tonic::Status::unimplemented("daemons stop when their stream is cancelled"))
    }
}

/// The repository's `examples/` folder.
pub fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A controller running in-process, with its log captured.
pub struct Controller {
    log: Arc<Mutex<Vec<String>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), bosun_controller::Error>>>,
    forwarder: Option<tokio::task::JoinHandle<()>>,
}

impl Controller {
    /// Starts the controller against `client` with `settings` (its log sink is replaced).
    pub fn start(client: kube::Client, mut settings: bosun_controller::Settings) -> Controller {
        let (tx, mut rx) = mpsc::unbounded_channel();
        settings.log_sink = Some(bosun_controller::LogSink(tx));
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = log.clone();
        let forwarder = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                sink.lock().unwrap().push(line);
            }
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(bosun_controller::run(client, settings, async move {
            let _ = stopped.await;
        }));
        Controller { log, stop: Some(stop), task: Some(task), forwarder: Some(forwarder) }
    }

    /// The log so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The shared log, still readable after `stop`.
    pub fn log_handle(&self) -> Arc<Mutex<Vec<String>>> {
        self.log.clone()
    }

    /// How many log lines contain `text`.
    pub fn count(&self, text: &str) -> usize {
        self.log().iter().filter(|l| l.contains(text)).count()
    }

    /// Waits until a log line contains `text`.
    pub async fn wait_log(&self, text: &str, timeout: Duration) {
        let log = self.log.clone();
        let text2 = text.to_string();
        wait_for(&format!("log line containing {text:?}"), timeout, || {
            let found = log.lock().unwrap().iter().any(|l| l.contains(&text2));
            async move { found }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", self.log().join("\n")));
    }

    /// Stops the controller and waits for it.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.expect("controller task").expect("controller run");
        }
        // The run is over and its log sink dropped: every line reaches the log.
        if let Some(f) = self.forwarder.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), f).await;
        }
    }
}

/// Polls `cond` until it holds or `timeout` passes.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut cond: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if cond().await {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Raw JSON access to KopfExample objects, through the controller's own API client.
pub mod kex {
    use bosun_controller::cluster::{Cluster, apply, content};
    use serde_json::{Value, json};

    /// The collection path in a namespace.
    pub fn path(ns: &str) -> String {
        format!("/apis/kopf.dev/v1/namespaces/{ns}/kopfexamples")
    }

    /// Applies `examples/crd.yaml`.
    pub async fn install_crd(client: &kube::Client) {
        let cluster = Cluster::new(client.clone());
        apply::apply_path(&cluster, &super::examples_dir().join("crd.yaml")).await.expect("the CRD applies");
    }

    /// Creates a KopfExample.
    pub async fn create(client: &kube::Client, ns: &str, name: &str, extra: Value) -> Value {
        let mut body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name, "namespace": ns}, "spec": {"field": "value"}});
        json_patch::merge(&mut body, &extra);
        Cluster::new(client.clone()).create(&path(ns), &body).await.expect("create")
    }

    /// Gets one, `None` when it is gone.
    pub async fn get(client: &kube::Client, ns: &str, name: &str) -> Option<Value> {
        match Cluster::new(client.clone()).get(&format!("{}/{name}", path(ns))).await {
            Ok(v) => Some(v),
            Err(e) if e.code() == Some(404) => None,
            Err(e) => panic!("get failed: {e}"),
        }
    }

    /// Merge-patches one.
    pub async fn patch(client: &kube::Client, ns: &str, name: &str, patch: Value) -> Value {
        Cluster::new(client.clone()).patch(&format!("{}/{name}", path(ns)), content::MERGE, &patch).await.expect("patch")
    }

    /// Polls one in `default` until `cond` holds, for at most `timeout`; panics with `what` and
    /// the object as last seen otherwise.
    pub async fn wait_until(
        client: &kube::Client,
        name: &str,
        what: &str,
        timeout: std::time::Duration,
        cond: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let o = get(client, "default", name).await.unwrap_or(Value::Null);
            if cond(&o) {
                return o;
            }
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}; last seen: {o:#}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Waits until one is gone.
    pub async fn wait_gone(client: &kube::Client, ns: &str, name: &str) {
        let what = format!("{ns}/{name} to be gone");
        super::wait_for(&what, std::time::Duration::from_secs(30), || {
            let (c, ns, name) = (client.clone(), ns.to_string(), name.to_string());
            async move { get(&c, &ns, &name).await.is_none() }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Deletes one.
    pub async fn delete(client: &kube::Client, ns: &str, name: &str) {
        Cluster::new(client.clone()).call(http::Method::DELETE, &format!("{}/{name}", path(ns)), None, None).await.expect("delete");
    }
}
