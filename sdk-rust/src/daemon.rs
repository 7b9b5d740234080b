//! Daemons (Kopf's `@kopf.daemon`): a long-running function per object, served through the
//! streaming `Daemon` call. What the daemon logs, posts or patches is streamed to the controller
//! at once. When the controller stops a daemon (the object is deleted or stops matching, or
//! the controller stops), it asks through `StopDaemon`; [`Cause::stopped`] says so, and the
//! daemon should return soon: what it records meanwhile and its exit still reach the
//! controller, which reads the stream to the end. Cancelling the call stops it too. The exit
//! (`DaemonExit`, with `stopped` when it was asked to stop) is sent only once the function has
//! returned: the controller holds the object (its finalizer, a handover) until then.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bosun_proto::v1 as pb;
use futures::Stream;
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tonic::Status;
use tracing::Instrument as _;

use crate::cause::Cause;
use crate::dispatch::{Dispatcher, run};
use crate::error::HandlerError;
use crate::json;
use crate::operator::Operator;
use crate::outputs::{EventRecord, LogRecord};
use crate::patch::Patch;

/// The stream of a running daemon's messages.
pub type DaemonStream = Pin<Box<dyn Stream<Item = Result<pb::DaemonMessage, Status>> + Send>>;

/// Whether a daemon was asked to stop (Kopf's `stopped`). Never stops for other handlers.
#[derive(Debug, Clone, Default)]
pub struct Stopped {
    /// `None` for handlers that are not daemons.
    flag: Option<watch::Receiver<bool>>,
}

impl Stopped {
    fn new() -> (watch::Sender<bool>, Self) {
        let (tx, flag) = watch::channel(false);
        (tx, Stopped { flag: Some(flag) })
    }

    /// Whether the daemon was asked to stop.
    pub fn is_stopped(&self) -> bool {
        self.flag.as_ref().is_some_and(|flag| *flag.borrow())
    }

    /// Resolves when the daemon is asked to stop (never for other handlers): `select!` it
    /// against the daemon's own work, or sleep with `tokio::time::timeout(d, stopped.wait())`.
    pub async fn wait(&self) {
        match &self.flag {
            // A dropped sender means the daemon's task is gone: stopped too.
            Some(flag) => {
                let _ = flag.clone().wait_for(|stopped| *stopped).await;
            }
            None => futures::future::pending().await,
        }
    }
}

/// A running daemon's start number and stop flag, by handler id and object uid.
type Instances = HashMap<(String, String), (u64, Arc<watch::Sender<bool>>)>;

/// The daemons running now, by handler id and object uid, with a number for each start (an
/// instance that ends late must not forget a newer one): `StopDaemon` finds them here.
#[derive(Debug, Clone, Default)]
pub(crate) struct Running {
    daemons: Arc<parking_lot::Mutex<Instances>>,
    starts: Arc<AtomicU64>,
}

impl Running {
    /// Notes a daemon that started; returns its number.
    fn add(&self, id: &str, uid: &str, stop: Arc<watch::Sender<bool>>) -> u64 {
        let n = self.starts.fetch_add(1, Ordering::Relaxed);
        self.daemons.lock().insert((id.to_string(), uid.to_string()), (n, stop));
        n
    }

    /// Forgets the daemon number `n`, which ended.
    fn remove(&self, id: &str, uid: &str, n: u64) {
        let mut daemons = self.daemons.lock();
        let key = (id.to_string(), uid.to_string());
        if daemons.get(&key).is_some_and(|(started, _)| *started == n) {
            daemons.remove(&key);
        }
    }

    /// Asks the daemon `id` of the object `uid` to stop; whether it runs.
    pub(crate) fn stop(&self, id: &str, uid: &str) -> bool {
        match self.daemons.lock().get(&(id.to_string(), uid.to_string())) {
            Some((_, stop)) => {
                stop.send_replace(true);
                true
            }
            None => false,
        }
    }
}

/// Where a daemon's records go at once.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    tx: mpsc::UnboundedSender<Result<pb::DaemonMessage, Status>>,
}

impl Live {
    fn send(&self, message: pb::daemon_message::Message) {
        // The controller may have gone away: then nobody is listening, and that is fine.
        let _ = self.tx.send(Ok(pb::DaemonMessage { message: Some(message) }));
    }

    pub(crate) fn log(&self, record: LogRecord) {
        self.send(pb::daemon_message::Message::Log(record.into_proto()));
    }

    pub(crate) fn event(&self, record: EventRecord) {
        self.send(pb::daemon_message::Message::Event(record.into_proto()));
    }

    pub(crate) fn patch(&self, patch: Patch) {
        let merge = patch.merge_patch();
        if merge.as_object().is_some_and(|m| !m.is_empty()) {
            self.send(pb::daemon_message::Message::MergePatch(json::encode(&merge)));
        }
        if !patch.json_ops().is_empty() {
            let ops = serde_json::Value::Array(patch.json_ops().to_vec());
            self.send(pb::daemon_message::Message::JsonPatch(json::encode(&ops)));
        }
    }
}

impl Operator {
    /// Registers a daemon (Kopf's `@kopf.daemon`): run for each object for as long as it exists
    /// and matches; check [`Cause::stopped`] and return when asked. Returning ends the daemon
    /// for that object, unless it failed temporarily (then it is restarted after a delay).
    pub fn on_daemon<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Daemon, Some(resource), None, f).with("on_daemon", |h| h.daemon = Some(pb::DaemonOptions::default()))
    }

    /// For daemons: how long the daemon may take to exit once asked to stop.
    pub fn cancellation_timeout(self, timeout: Duration) -> Self {
        self.with("cancellation_timeout", |h| h.daemon.get_or_insert_default().cancellation_timeout_seconds = timeout.as_secs_f64())
    }
}

impl Dispatcher {
    /// Starts a daemon, as `Daemon` does: its messages, then its exit. [`Dispatcher::stop_daemon`]
    /// asks it to stop, and so does dropping the stream (the controller cancelling the call).
    pub fn daemon(&self, request: pb::DaemonRequest) -> Result<DaemonStream, Status> {
        let handler = self.daemon_handler(&request.handler_id)?;
        let func = handler.func.clone();
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop, stopped) = Stopped::new();
        let cause = Cause::from_daemon(&request, Live { tx: tx.clone() }, stopped)
            .map_err(|e| Status::invalid_argument(e.to_string()))?
            .with_indices(self.indices());
        let (running, id, uid) = (self.running().clone(), request.handler_id.clone(), cause.uid().to_string());
        let stop = Arc::new(stop);
        let n = running.add(&id, &uid, stop.clone());
        tokio::spawn(
            async move {
                let daemon = run(&func, &cause);
                tokio::pin!(daemon);
                let ran = tokio::select! {
                    ran = &mut daemon => ran,
                    () = tx.closed() => {
                        stop.send_replace(true);
                        daemon.await
                    }
                };
                // Sent only now that the function has returned: the controller takes it as the
                // daemon's real end (a handover or a deletion waits for it).
                let exit = pb::DaemonExit {
                    outcome: ran.outcome.into(),
                    message: ran.message,
                    delay_seconds: ran.delay_seconds,
                    stopped: *stop.borrow(),
                };
                let _ = tx.send(Ok(pb::DaemonMessage { message: Some(pb::daemon_message::Message::Exit(exit)) }));
                // Forgotten only once its exit is sent: a stop asked meanwhile finds it, and
                // the controller reads on to the exit.
                running.remove(&id, &uid, n);
            }
            .instrument(tracing::Span::current()),
        );
        Ok(Box::pin(tokio_stream::wrappers::UnboundedReceiverStream::new(rx)))
    }

    /// Asks a running daemon to stop, as `StopDaemon` does: its `stopped` flag is set and its
    /// stream ends with its exit. `stopping: false` when no such daemon runs.
    pub fn stop_daemon(&self, request: &pb::StopDaemonRequest) -> pb::StopDaemonResponse {
        pb::StopDaemonResponse { stopping: self.running().stop(&request.handler_id, &request.uid) }
    }
}
