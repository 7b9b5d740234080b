//! Daemons (Kopf's `kopf.daemon`): one `Daemon` stream per object and daemon handler, opened
//! after the daemon's `initial_delay`, for as long as `background` keeps it. Messages apply as
//! they come: log lines, events, merge and JSON patches. A daemon that exits with a temporary
//! error (or an unexpected one, in the temporary errors mode), or whose server cannot be
//! reached, is restarted after its delay or its own backoff; otherwise it stays stopped for that
//! object until the controller restarts.
//!
//! A daemon is stopped as Kopf stops one, and seen to its real end: asked to stop (the object
//! is deleted, stops matching or is not ours now, ownership is revoked, or the controller
//! stops), the controller asks its server to stop it (`StopDaemon`) and reads its stream on —
//! log lines, events, patches — until the server reports its exit, which it sends only once
//! the daemon's function has returned (`DaemonExit.stopped`). It waits for at most the
//! daemon's `cancellation_timeout` when it has one (then the call is cancelled and the daemon
//! left orphaned, in Kopf's words), else for as long as it takes, the controller's own stop
//! included (that stop goes on after its grace, but a Lease it holds is not given up while a
//! daemon runs). The daemon counts as running from the moment its call is sent, whether or not
//! its stream has answered: grpcio, grpc-js and grpc-go send a stream's headers only with its
//! first message. Meanwhile the daemon holds its object's turn and finalizer:
//! a handover, a pause's settling and a deletion wait for its end, so that one daemon never
//! runs twice. A StopDaemon that fails or finds no such daemon is asked again with a backoff
//! while the stream is read; only a server without StopDaemon (older servers) gets the
//! cancellation at once as its stop signal, and its daemon counts as running for its
//! `cancellation_timeout` more. After a revocation nothing the daemon sends is written: the
//! object may be another replica's already. A stopped daemon is never restarted.

use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::context::Latest;
use super::context::{ResourceContext, to_json};
use crate::coordination::Turn;
use crate::handlers::dispatch::{CallFailure, DaemonStream};
use crate::logs::ObjectRef;
use crate::logs::human;
use crate::object::{self, object_ref};
use crate::state::outcomes::{Answer, Attempt, DaemonNext, attempt_of, daemon_next};
use crate::state::plan::Writes;
use crate::state::registry::{ErrorsMode, Handler};

/// How long a handler server has to answer StopDaemon.
const STOP_CALL: Duration = Duration::from_secs(5);

/// How long in-flight cycles get to finish after a stop is requested. Daemons are not bound
/// by it: they are waited for to their end (or their `cancellation_timeout`) and hold their
/// turns meanwhile, so that a Lease is not given up while one runs (`coordination::drain`).
pub(crate) const GRACE: Duration = Duration::from_secs(10);

/// How a daemon's stream ended.
enum End {
    /// Its server could not be reached.
    Unreachable,
    /// The server ended the stream without an exit message.
    NoExit,
    /// With this exit (or a failure that counts as one).
    Exit(Attempt),
}

impl End {
    fn of(answer: &Answer) -> End {
        attempt_of(answer, None).map_or(End::Unreachable, End::Exit)
    }
}

/// How one run of a daemon ended.
enum Ran {
    /// On its own.
    Ended(End),
    /// Asked to stop: its end seen, or cut short (`None`: cancelled).
    Stopped(Option<End>),
}

/// A daemon's call: its stream once the server answered, and what it sent since.
enum Call<'a> {
    /// Sent, not answered yet: the daemon runs (or is about to) but has sent nothing.
    Opening(BoxFuture<'a, Result<DaemonStream, CallFailure>>),
    /// Answered: its messages.
    Open(DaemonStream),
    /// Over.
    Done,
}

/// One step of a daemon's call.
enum Step {
    /// A message from the daemon.
    Message(pb::DaemonMessage),
    /// The call failed before its stream was answered.
    NotStarted(CallFailure),
    /// The stream failed.
    Failed(CallFailure),
    /// The stream ended.
    Ended,
}

impl Call<'_> {
    /// The next step; cancel-safe (the opening and the stream stay in `self`), so a select may
    /// drop it and call again.
    async fn next(&mut self) -> Step {
        loop {
            match self {
                Call::Opening(opening) => match opening.await {
                    Ok(stream) => *self = Call::Open(stream),
                    Err(failure) => {
                        *self = Call::Done;
                        return Step::NotStarted(failure);
                    }
                },
                Call::Open(stream) => {
                    return match stream.next().await {
                        None => Step::Ended,
                        Some(Ok(message)) => Step::Message(message),
                        Some(Err(failure)) => Step::Failed(failure),
                    };
                }
                Call::Done => return Step::Ended,
            }
        }
    }
}

/// Waits until the daemon is asked to stop.
/// `background` asks (the object is deleted, stops matching, or is not ours now), ownership is
/// revoked (then nothing it sends is written any more), or the controller stops: each is
/// waited for alike.
async fn stopping(requested: &CancellationToken, stop: &mut watch::Receiver<bool>, turn: &Turn) {
    tokio::select! {
        _ = turn.revoked() => {}
        _ = requested.cancelled() => {}
        _ = stop.wait_for(|s| *s) => {}
    }
}

/// Whether the turn was revoked (not merely handed over).
fn revoked(turn: &Turn) -> bool {
    futures::FutureExt::now_or_never(turn.revoked()).is_some()
}

/// Runs the daemon `h` for one object until it ends for good or is stopped (`requested`, a
/// revocation of its `turn`, or the controller's stop).
pub async fn run(ctx: Arc<ResourceContext>, h: Arc<Handler>, latest: watch::Receiver<Latest>, requested: CancellationToken, turn: &Turn) {
    let mut stop = ctx.stop.clone();
    tokio::select! { _ = stopping(&requested, &mut stop, turn) => return, _ = tokio::time::sleep(h.daemon.initial_delay) => {} }
    let mut retry = 0u32;
    loop {
        // A daemon (re)starts only while no index is being filled, and only for an object
        // that is ours (one given away meanwhile is stopped by `background`).
        if !ctx.gate.is_open() {
            tokio::select! { _ = stopping(&requested, &mut stop, turn) => return, _ = ctx.gate.opened() => {} }
        }
        if !turn.is_current() {
            return;
        }
        let body = latest.borrow().0.clone();
        let obj = object_ref(&body);
        let memo = ctx.memos.lock().get(object::meta_str(&body, "uid")).cloned().unwrap_or_default();
        let req = pb::DaemonRequest {
            handler_id: h.id.clone(),
            resource: Some(ctx.pb_resource()),
            object: to_json(&body),
            retry,
            memo,
            handler_key: h.key.clone(),
        };
        ctx.log.debug(Some(&obj), &format!("Daemon '{}' is starting.", h.id));
        // Each run of the daemon is a span (`daemon watch_fn`, the object): the call carries
        // it to the handler server, and the writes of its messages are its children.
        let span = tracing::info_span!(
            "daemon",
            otel.name = %format_args!("daemon {} {}", h.id, obj.path()),
            namespace = %obj.namespace,
            name = %obj.name,
            handler = %h.id,
            trace_id = tracing::field::Empty,
        );
        crate::handlers::trace_context::record_trace_id(&span);
        let run = Runner { ctx: &ctx, h: &h, obj: &obj, latest: &latest, turn };
        let ended = match run.once(&requested, &mut stop, req).instrument(span).await {
            Ran::Stopped(None) => return,
            Ran::Stopped(Some(end)) => {
                run.said_end(&end, true);
                return;
            }
            Ran::Ended(end) => end,
        };
        let next = match &ended {
            End::NoExit => DaemonNext::Done,
            End::Exit(attempt) => daemon_next(&h, Some(attempt)),
            End::Unreachable => daemon_next(&h, None),
        };
        match next {
            DaemonNext::Done => {
                run.said_end(&ended, false);
                return;
            }
            DaemonNext::Restart(delay) => {
                let why = match &ended {
                    End::Exit(Attempt::Temporary { message, .. }) => format!(" failed temporarily: {message};"),
                    End::Exit(Attempt::Unexpected { message, .. }) => format!(" failed with an exception: {message};"),
                    _ => String::new(),
                };
                ctx.log.warn(Some(&obj), &format!("Daemon '{}'{why} will be restarted in {}.", h.id, human(delay)));
                retry = retry.saturating_add(1);
                tokio::select! { _ = stopping(&requested, &mut stop, turn) => return, _ = tokio::time::sleep(delay) => {} }
            }
        }
    }
}

/// One daemon of one object, for one run.
struct Runner<'a> {
    ctx: &'a ResourceContext,
    h: &'a Handler,
    obj: &'a ObjectRef,
    latest: &'a watch::Receiver<Latest>,
    /// The object's turn, held until the daemon's end.
    turn: &'a Turn,
}

impl Runner<'_> {
    /// One run of the daemon, from the call to its exit (or its stream's end), or to its stop.
    /// The daemon counts as running from the moment its call is sent, not from its stream's
    /// first answer: grpcio, grpc-js and grpc-go send a server stream's headers only with its
    /// first message, so a daemon that has said nothing yet is stopped and waited for like any.
    async fn once(&self, requested: &CancellationToken, stop: &mut watch::Receiver<bool>, req: pb::DaemonRequest) -> Ran {
        let mut call = Call::Opening(self.ctx.servers[self.h.server].daemon(req));
        loop {
            let next = tokio::select! {
                _ = stopping(requested, stop, self.turn) => return Ran::Stopped(self.wind_down(call).await),
                n = call.next() => n,
            };
            if let Some(end) = self.absorb(next).await {
                return Ran::Ended(end);
            }
        }
    }

    /// Takes one step of the call: `Some` when the daemon ended with it.
    async fn absorb(&self, next: Step) -> Option<End> {
        match next {
            Step::Ended => Some(End::NoExit),
            Step::NotStarted(failure) => {
                self.ctx.log.warn(Some(self.obj), &format!("Daemon '{}' could not be started: {failure}.", self.h.id));
                Some(End::of(&failure.answer()))
            }
            Step::Failed(failure) => {
                self.ctx.log.warn(Some(self.obj), &format!("Daemon '{}' {failure}.", self.h.id));
                Some(End::of(&failure.answer()))
            }
            Step::Message(message) => {
                let body = self.latest.borrow().0.clone();
                let e = apply(self.ctx, self.h, &body, message, self.turn).await?;
                let outcome = pb::Outcome::try_from(e.outcome).unwrap_or(pb::Outcome::UnexpectedError);
                Some(End::of(&Answer::Answered { outcome, message: e.message, delay: e.delay_seconds }))
            }
        }
    }

    /// Stops the running daemon: asks its server to (StopDaemon), then reads its stream to the
    /// end or until its time is up; `None` when it was cancelled without an end seen. A
    /// StopDaemon that fails, or finds no such daemon (its exit may be on its way, or it has
    /// not started yet), is asked again with a backoff while the stream is read: only a server
    /// without StopDaemon (UNIMPLEMENTED) gets the cancellation at once as its stop signal.
    async fn wind_down(&self, mut call: Call<'_>) -> Option<End> {
        let (ctx, h) = (self.ctx, self.h);
        let timeout = (!h.daemon.cancellation_timeout.is_zero()).then_some(h.daemon.cancellation_timeout);
        // Whoever asked, the daemon is waited for as long as it takes, or its cancellation
        // timeout: the controller's own stop too, so that its Lease is not given up while the
        // daemon runs (the stop then goes on without it, and the Lease is left to expire).
        let deadline = timeout.map(|b| Instant::now() + b);
        let req = pb::StopDaemonRequest {
            handler_id: h.id.clone(),
            handler_key: h.key.clone(),
            uid: object::meta_str(&self.latest.borrow().0, "uid").to_string(),
        };
        let mut asked = 0usize;
        // When to ask the server again (`None`: it said it is stopping the daemon).
        let mut ask_at = Some(Instant::now());
        loop {
            if ask_at.is_some_and(|at| at <= Instant::now()) {
                let within = deadline.map_or(STOP_CALL, |d| d.saturating_duration_since(Instant::now()).min(STOP_CALL));
                asked += 1;
                ask_at = match ctx.servers[h.server].stop_daemon(req.clone(), within).await {
                    Ok(said) if said.stopping => {
                        ctx.log.debug(Some(self.obj), &format!("Daemon '{}' is signalled to exit gracefully.", h.id));
                        None
                    }
                    Err(CallFailure::Failed { code: tonic::Code::Unimplemented, .. }) => {
                        return self.cancelled(call, timeout).await;
                    }
                    said => {
                        if asked == 1 {
                            let why_not = match said {
                                Ok(_) => "its handler server has no such daemon running".to_string(),
                                Err(failure) => format!("StopDaemon {failure}"),
                            };
                            ctx.log.debug(Some(self.obj), &format!("Daemon '{}' is not stopped yet ({why_not}); asking again.", h.id));
                        }
                        Some(Instant::now() + crate::runtime::worker_state::throttle_delay(asked).min(STOP_CALL))
                    }
                };
            }
            let out_of_time = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            let ask_again = async {
                match ask_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                n = call.next() => n,
                _ = out_of_time => {
                    ctx.log.warn(Some(self.obj), &format!("Daemon '{}' did not exit in time. Leaving it orphaned.", h.id));
                    return None;
                }
                _ = ask_again => continue,
            };
            if let Some(end) = self.absorb(next).await {
                return Some(end);
            }
        }
    }

    /// A server without StopDaemon: the stream's cancellation is the daemon's stop signal, and
    /// its end cannot be seen; it counts as running for its `cancellation_timeout` more.
    async fn cancelled(&self, call: Call<'_>, timeout: Option<Duration>) -> Option<End> {
        drop(call);
        let why_not = "its handler server cannot stop it on request (no StopDaemon)";
        self.ctx.log.debug(Some(self.obj), &format!("Daemon '{}' is cancelled ({why_not}).", self.h.id));
        if let Some(t) = timeout {
            tokio::time::sleep(t).await;
        }
        None
    }

    /// Logs how the daemon ended for good, in Kopf's words; `stopped`: it was asked to.
    fn said_end(&self, end: &End, stopped: bool) {
        let (log, id, obj) = (&self.ctx.log, &self.h.id, Some(self.obj));
        match end {
            End::NoExit | End::Exit(Attempt::Success(_)) => log.info(obj, &format!("Daemon '{id}' succeeded.")),
            End::Exit(Attempt::Skipped) | End::Unreachable => {}
            End::Exit(Attempt::Permanent(m)) => log.error(obj, &format!("Daemon '{id}' failed permanently: {m}")),
            End::Exit(Attempt::Temporary { message, .. }) => log.error(obj, &format!("Daemon '{id}' failed temporarily: {message}")),
            End::Exit(Attempt::Unexpected { message, .. }) if self.h.errors == ErrorsMode::Ignored => {
                log.warn(obj, &format!("Daemon '{id}' failed with an exception and will ignore it: {message}"))
            }
            End::Exit(Attempt::Unexpected { message, .. }) => {
                log.error(obj, &format!("Daemon '{id}' failed with an exception and will stop now: {message}"))
            }
        }
        let how = if stopped { "on request" } else { "on its own" };
        log.debug(obj, &format!("Daemon '{id}' has exited {how} and will not be retried or restarted."));
    }
}

/// Applies one daemon message; returns the exit when it is one. Patches are written only
/// while the turn is not revoked: after a revocation another replica may own the object, so a
/// patch is not sent then, and one being written (perhaps retried through an outage) is cut
/// off at the revocation instead of landing over the new owner's work.
async fn apply(ctx: &ResourceContext, h: &Handler, body: &Value, message: pb::DaemonMessage, turn: &Turn) -> Option<pb::DaemonExit> {
    use pb::daemon_message::Message;
    let obj = object_ref(body);
    let message = message.message?;
    if revoked(turn) && matches!(message, Message::MergePatch(_) | Message::JsonPatch(_)) {
        ctx.log.debug(Some(&obj), &format!("Daemon '{}' sent a patch after ownership was revoked; not applied.", h.id));
        return None;
    }
    match message {
        Message::Log(line) => ctx.log_lines(&obj, std::slice::from_ref(&line)),
        Message::Event(event) => ctx.post_events(body, std::iter::once(&event)).await,
        Message::MergePatch(bytes) => {
            let mut w = Writes::none();
            let added = match serde_json::from_slice::<Value>(&bytes) {
                Err(e) => Err(format!("it is not JSON: {e}")),
                Ok(patch) => ctx.subject().add_checked_patch(body, &patch, &mut w).map_err(|e| e.to_string()),
            };
            match added {
                Err(why) => ctx.log.warn(Some(&obj), &format!("Daemon '{}' sent a merge patch that is not applied: {why}", h.id)),
                Ok(()) => write(ctx, h, &obj, body, &w, turn).await,
            }
        }
        Message::JsonPatch(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(p) if serde_json::from_value::<json_patch::Patch>(p.clone()).is_ok() => {
                let w = Writes { json_patches: vec![(h.id.clone(), p)], ..Writes::none() };
                write(ctx, h, &obj, body, &w, turn).await;
            }
            _ => ctx.log.warn(Some(&obj), &format!("Daemon '{}' sent an invalid JSON patch; ignored.", h.id)),
        },
        Message::Exit(exit) => return Some(exit),
    }
    None
}

/// Writes a daemon's patch unless, or until, its turn is revoked: a revocation drops the write
/// with its retries (what was sent before it may still land; nothing is sent after it).
async fn write(ctx: &ResourceContext, h: &Handler, obj: &ObjectRef, body: &Value, w: &Writes, turn: &Turn) {
    tokio::select! {
        biased;
        _ = turn.revoked() => {
            ctx.log.warn(Some(obj), &format!("Daemon '{}' had its patch cut off: ownership was revoked while it was written.", h.id));
        }
        written = ctx.write(body, w) => {
            if let Err(e) = written {
                ctx.log.warn(Some(obj), &format!("Daemon '{}' could not patch the object: {e}", h.id));
            }
        }
    }
}
