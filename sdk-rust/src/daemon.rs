//! Daemons (Kopf's `@kopf.daemon`): a long-running function per object, served through the
//! streaming `Daemon` call. What the daemon logs, posts or patches is streamed to the controller
//! at once. When the controller stops a daemon (the object is deleted or stops matching, or
//! the controller stops), it asks through `StopDaemon`; [`Cause::stopped`] says so, and the
//! daemon should return soon: what it records meanwhile and its exit still reach the
//! controller, which reads the stream to the end. Cancelling the call stops it too. The exit
//! (`DaemonExit`, with `stopped` when it was asked to stop) is sent only once the function has
//! returned: the controller holds the object (its finalizer, a handover) until then.
//!
//! Here: registering daemons and serving `Daemon` and `StopDaemon`. What a daemon's cause
//! holds is in `stopped.rs` and `live.rs`; the daemons running now, in `running.rs`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use serde::Serialize;
use tokio::sync::mpsc;
use tonic::Status;
use tracing::Instrument as _;

use crate::cause::Cause;
use crate::dispatch::{Dispatcher, run};
use crate::error::HandlerError;
use crate::live::{DaemonStream, Live};
use crate::operator::Operator;
use crate::stopped::Stopped;

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
        let cause = Cause::from_daemon(&request, Live::new(tx.clone()), stopped)
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
