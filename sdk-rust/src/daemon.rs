//! Daemons (Kopf's `@kopf.daemon`): a long-running function per object, served through the
//! streaming `Daemon` call. What the daemon logs, posts or patches is streamed to the controller
//! at once; when the controller cancels the call (the object is deleted or stops matching, or
//! the controller stops), [`Cause::stopped`] says so, and the daemon should return soon.

use std::future::Future;
use std::pin::Pin;
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
    /// Starts a daemon, as `Daemon` does: its messages, then its exit. Dropping the stream (the
    /// controller cancelling the call) asks the daemon to stop.
    pub fn daemon(&self, request: pb::DaemonRequest) -> Result<DaemonStream, Status> {
        let handler = self.daemon_handler(&request.handler_id)?;
        let func = handler.func.clone();
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop, stopped) = Stopped::new();
        let cause = Cause::from_daemon(&request, Live { tx: tx.clone() }, stopped)
            .map_err(|e| Status::invalid_argument(e.to_string()))?
            .with_indices(self.indices());
        tokio::spawn(
            async move {
                let daemon = run(&func, &cause);
                tokio::pin!(daemon);
                let ran = tokio::select! {
                    ran = &mut daemon => ran,
                    () = tx.closed() => {
                        let _ = stop.send(true);
                        daemon.await
                    }
                };
                let exit = pb::DaemonExit { outcome: ran.outcome.into(), message: ran.message, delay_seconds: ran.delay_seconds };
                let _ = tx.send(Ok(pb::DaemonMessage { message: Some(pb::daemon_message::Message::Exit(exit)) }));
            }
            .instrument(tracing::Span::current()),
        );
        Ok(Box::pin(tokio_stream::wrappers::UnboundedReceiverStream::new(rx)))
    }
}
