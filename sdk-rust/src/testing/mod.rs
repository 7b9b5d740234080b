//! End-to-end tests of handler servers without a cluster: Kopf's `KopfRunner`, in-process.
//!
//! A [`Runner`] starts the embedded dev cluster, your [`Operator`] on `127.0.0.1:0` and the
//! controller pointed at it, all inside the test's runtime; the test then applies YAML, waits
//! for conditions on objects and for lines in the controller's log, and stops everything.
//!
//! ```no_run
//! # async fn demo(operator: bosun_sdk::Operator) -> Result<(), bosun_sdk::testing::Error> {
//! use std::time::Duration;
//! use bosun_sdk::testing::Runner;
//!
//! let runner = Runner::start(operator).await?;
//! runner.apply_file("examples/crd.yaml").await?;
//! runner.apply_file("examples/obj.yaml").await?;
//! runner.wait_log("Handler 'create_fn' succeeded.", Duration::from_secs(10)).await?;
//! let object = runner
//!     .wait_for("kex/kopf-example-1", |o| o["status"]["create_fn"]["message"] == "hello world", Duration::from_secs(10))
//!     .await?;
//! runner.stop().await?;
//! # let _ = object; Ok(()) }
//! ```
//!
//! Needs the `testing` feature: `bosun-sdk = { ..., features = ["testing"] }` in
//! `[dev-dependencies]`.

mod error;
mod objects;

pub use error::Error;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bosun_controller::{LogSink, Settings};
use bosun_devcluster::DevCluster;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::operator::Operator;
use crate::resource::Selector;
use crate::serve::{self, serve_dispatcher};

/// How long `stop` waits for each part to finish.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The dev cluster, a handler server and the controller, running inside a test.
pub struct Runner {
    cluster: Option<DevCluster>,
    client: kube::Client,
    handler_url: String,
    lines: Arc<Mutex<Vec<String>>>,
    line_count: watch::Receiver<usize>,
    controller: Option<Part<Result<(), bosun_controller::Error>>>,
    server: Option<Part<Result<(), serve::Error>>>,
    collector: Option<JoinHandle<()>>,
}

/// A background task and the way to ask it to stop.
type Part<T> = (oneshot::Sender<()>, JoinHandle<T>);

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").field("handler_url", &self.handler_url).finish_non_exhaustive()
    }
}

impl Runner {
    /// Starts everything with the controller's default settings.
    pub async fn start(operator: Operator) -> Result<Runner, Error> {
        Self::start_with(operator, Settings::default()).await
    }

    /// Starts everything with these controller settings (their `handlers` and `log_sink` are
    /// set by the runner).
    pub async fn start_with(operator: Operator, mut settings: Settings) -> Result<Runner, Error> {
        let dispatcher = operator.into_dispatcher()?;
        let cluster = DevCluster::start_local().await?;
        let client = cluster.client();

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(Error::Listen)?;
        let handler_url = format!("http://{}", listener.local_addr().map_err(Error::Listen)?);
        let (server_stop, server_stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(serve_dispatcher(dispatcher, listener, async {
            let _ = server_stopped.await;
        }));

        let (sink, mut received) = mpsc::unbounded_channel::<String>();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (count_tx, line_count) = watch::channel(0usize);
        let collector = tokio::spawn({
            let lines = lines.clone();
            async move {
                while let Some(line) = received.recv().await {
                    eprintln!("{line}"); // shown by the test harness when the test fails
                    let mut lines = lines.lock();
                    lines.push(line);
                    let _ = count_tx.send(lines.len());
                }
            }
        });

        settings.handlers = vec![handler_url.clone()];
        settings.log_sink = Some(LogSink(sink));
        let (controller_stop, controller_stopped) = oneshot::channel::<()>();
        let controller = tokio::spawn(bosun_controller::run(client.clone(), settings, async {
            let _ = controller_stopped.await;
        }));

        Ok(Runner {
            cluster: Some(cluster),
            client,
            handler_url,
            lines,
            line_count,
            controller: Some((controller_stop, controller)),
            server: Some((server_stop, server)),
            collector: Some(collector),
        })
    }

    /// A client of the dev cluster.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The dev cluster, for its URL or kubeconfig (for `kubectl` in a test).
    pub fn cluster(&self) -> &DevCluster {
        self.cluster.as_ref().expect("the cluster runs until `stop`")
    }

    /// Where the handler server listens (`http://127.0.0.1:PORT`).
    pub fn handler_url(&self) -> &str {
        &self.handler_url
    }

    /// Applies every object of a YAML stream (several documents, `List`s): creates each, or
    /// merge-patches it when it exists. Objects without a namespace go to `default`. Waits for
    /// applied CRDs to be served. Returns the objects as stored.
    pub async fn apply(&self, yaml: &str) -> Result<Vec<Value>, Error> {
        let mut applied = Vec::new();
        for doc in objects::documents(yaml)? {
            applied.push(objects::apply(&self.client, doc).await?);
        }
        Ok(applied)
    }

    /// Applies a YAML file; see [`apply`](Self::apply).
    pub async fn apply_file(&self, path: impl AsRef<Path>) -> Result<Vec<Value>, Error> {
        self.apply(&read(path.as_ref())?).await
    }

    /// Deletes every object a YAML stream names, last first; absent objects are fine. Does not
    /// wait: objects with finalizers stay until the controller removes them (see
    /// [`wait_gone`](Self::wait_gone)).
    pub async fn delete(&self, yaml: &str) -> Result<(), Error> {
        for doc in objects::documents(yaml)?.iter().rev() {
            objects::delete(&self.client, doc).await?;
        }
        Ok(())
    }

    /// Deletes the objects of a YAML file; see [`delete`](Self::delete).
    pub async fn delete_file(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        self.delete(&read(path.as_ref())?).await
    }

    /// The object `resource/name` (in `default` if namespaced), or `None` when absent.
    /// `resource` is anything `kubectl get` accepts: `kex`, `kopfexamples.kopf.dev`,
    /// `kopf.dev/v1/kopfexamples`.
    pub async fn get(&self, target: &str) -> Result<Option<Value>, Error> {
        let (selector, name) = parse_target(target)?;
        let found = objects::resolve_or_fail(&self.client, &selector).await?;
        let api = found.api(&self.client, None);
        let object = api.get_opt(name).await.map_err(|source| Error::Api { action: format!("get {target}"), source })?;
        Ok(object.map(|o| serde_json::to_value(o).expect("objects always serialize")))
    }

    /// Waits until the object `resource/name` exists and `predicate` holds for it; returns it.
    /// Watches the object (no polling); waits for its resource to be served first.
    pub async fn wait_for(&self, target: &str, predicate: impl Fn(&Value) -> bool, timeout: Duration) -> Result<Value, Error> {
        let what = format!("{target} to match");
        let found = self.watch_until(target, timeout, &what, |object| object.is_some_and(&predicate)).await?;
        Ok(found.expect("only an existing object matches"))
    }

    /// Waits until the object `resource/name` is gone (for example after its deletion handlers
    /// ran and the controller removed its finalizer).
    pub async fn wait_gone(&self, target: &str, timeout: Duration) -> Result<(), Error> {
        let what = format!("{target} to be gone");
        self.watch_until(target, timeout, &what, |object| object.is_none()).await.map(drop)
    }

    /// Watches one object until `done` holds for it (`None`: absent) or the deadline passes.
    async fn watch_until(
        &self,
        target: &str,
        timeout: Duration,
        what: &str,
        done: impl Fn(Option<&Value>) -> bool,
    ) -> Result<Option<Value>, Error> {
        use futures::StreamExt;
        let deadline = Instant::now() + timeout;
        let timed_out = |last: String| Error::Timeout { what: what.to_string(), timeout, last };
        let (selector, name) = parse_target(target)?;
        let found = loop {
            match objects::resolve(&self.client, &selector).await? {
                Some(found) => break found,
                None if Instant::now() >= deadline => return Err(timed_out(format!("no resource named {selector} is served"))),
                None => tokio::time::sleep(objects::POLL).await, // a CRD may still be on its way
            }
        };
        let mut events = std::pin::pin!(kube::runtime::watcher::watch_object(found.api(&self.client, None), name));
        let mut last = None;
        loop {
            match tokio::time::timeout_at(deadline, events.next()).await {
                Err(_) => {
                    let last = last.map_or_else(|| "no such object".into(), |o: Value| o.to_string());
                    return Err(timed_out(last));
                }
                Ok(None) => return Err(timed_out("the watch ended".into())),
                Ok(Some(Err(error))) => {
                    tracing::debug!("watching {target} failed, retrying: {error}");
                    tokio::time::sleep(objects::POLL).await;
                }
                Ok(Some(Ok(object))) => {
                    let object = object.map(|o| serde_json::to_value(o).expect("objects always serialize"));
                    if done(object.as_ref()) {
                        return Ok(object);
                    }
                    last = object;
                }
            }
            self.ensure_controller_runs(what)?;
        }
    }

    /// Waits until a line of the controller's log contains `needle`; returns that line.
    pub async fn wait_log(&self, needle: &str, timeout: Duration) -> Result<String, Error> {
        let deadline = Instant::now() + timeout;
        let mut count = self.line_count.clone();
        let mut checked = 0;
        loop {
            {
                let lines = self.lines.lock();
                if let Some(line) = lines[checked..].iter().find(|l| l.contains(needle)) {
                    return Ok(line.clone());
                }
                checked = lines.len();
            }
            let what = format!("a log line with {needle:?}");
            self.ensure_controller_runs(&what)?;
            match tokio::time::timeout_at(deadline, count.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => {
                    let last = self.lines.lock().iter().rev().take(10).rev().cloned().collect::<Vec<_>>().join("\n");
                    return Err(Error::Timeout { what, timeout, last: format!("the log's last lines:\n{last}") });
                }
            }
        }
    }

    /// The controller's log lines so far.
    pub fn logs(&self) -> Vec<String> {
        self.lines.lock().clone()
    }

    /// The controller's log so far, as one string (Kopf's `runner.output`).
    pub fn output(&self) -> String {
        self.lines.lock().join("\n")
    }

    /// How many log lines so far contain `needle` (for "succeeded exactly once" checks).
    pub fn count_logs(&self, needle: &str) -> usize {
        self.lines.lock().iter().filter(|l| l.contains(needle)).count()
    }

    fn ensure_controller_runs(&self, what: &str) -> Result<(), Error> {
        match &self.controller {
            Some((_, task)) if task.is_finished() => Err(Error::ControllerExited(what.to_string())),
            _ => Ok(()),
        }
    }

    /// Stops the controller (as on SIGTERM), then the handler server and the dev cluster; returns
    /// the controller's own result (Kopf's `runner.exit_code == 0` check).
    pub async fn stop(mut self) -> Result<(), Error> {
        let controller = match self.controller.take() {
            Some((stop, task)) => {
                let _ = stop.send(());
                Some(join(task).await)
            }
            None => None,
        };
        let server = match self.server.take() {
            Some((stop, task)) => {
                let _ = stop.send(());
                Some(join(task).await)
            }
            None => None,
        };
        if let Some(cluster) = self.cluster.take() {
            cluster.shutdown().await;
        }
        if let Some(collector) = self.collector.take() {
            // Ends when the controller has dropped its log sink; never blocks `stop` for long.
            let _ = tokio::time::timeout(Duration::from_secs(1), collector).await;
        }
        if let Some(result) = controller {
            result.map_err(|message| Error::Stop { part: "controller", message })??;
        }
        if let Some(result) = server {
            result.map_err(|message| Error::Stop { part: "handler server", message })??;
        }
        Ok(())
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some((_, task)) = self.controller.take() {
            task.abort();
        }
        if let Some((_, task)) = self.server.take() {
            task.abort();
        }
        if let Some(task) = self.collector.take() {
            task.abort();
        }
    }
}

/// Waits for a task, aborting it after [`STOP_TIMEOUT`].
async fn join<T>(task: JoinHandle<T>) -> Result<T, String> {
    let abort = task.abort_handle();
    match tokio::time::timeout(STOP_TIMEOUT, task).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(join_error)) => Err(join_error.to_string()),
        Err(_) => {
            abort.abort();
            Err(format!("did not stop within {STOP_TIMEOUT:?}"))
        }
    }
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.display().to_string(), source })
}

/// `kex/kopf-example-1` → (`kex`, `kopf-example-1`).
fn parse_target(target: &str) -> Result<(Selector, &str), Error> {
    let (resource, name) = target.rsplit_once('/').ok_or_else(|| Error::InvalidTarget(target.into()))?;
    if name.is_empty() {
        return Err(Error::InvalidTarget(target.into()));
    }
    Ok((Selector::parse(resource)?, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_a_resource_and_a_name() {
        let table = [
            ("kex/kopf-example-1", "kex", "kopf-example-1"),
            ("kopf.dev/v1/kopfexamples/kopf-example-1", "kopf.dev/v1/kopfexamples", "kopf-example-1"),
            ("kopfexamples.kopf.dev/x", "kopfexamples.kopf.dev", "x"),
        ];
        for (input, resource, name) in table {
            let (selector, parsed_name) = parse_target(input).unwrap();
            assert_eq!((selector, parsed_name), (Selector::parse(resource).unwrap(), name), "{input}");
        }
        for input in ["kex", "kex/", "/x"] {
            assert!(parse_target(input).is_err(), "{input}");
        }
    }
}
