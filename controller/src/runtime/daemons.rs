//! Daemons (Kopf's `kopf.daemon`): one `Daemon` stream per object and daemon handler, opened
//! after the daemon's `initial_delay`, for as long as `background` keeps it. Cancelling the
//! call (dropping the stream) is the daemon's stop signal. Messages apply as they come: log
//! lines, events, merge and JSON patches. A daemon that exits with a temporary error (or an
//! unexpected one, in the temporary errors mode), or whose server cannot be reached, is
//! restarted after its delay or its own backoff; otherwise it stays stopped for that object
//! until the controller restarts.

use std::sync::Arc;

use bosun_proto::v1 as pb;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument as _;

use super::background::Latest;
use super::context::{ResourceContext, to_json};
use crate::engines::human;
use crate::logs::ObjectRef;
use crate::object::{self, object_ref};
use crate::state::outcomes::{Answer, Attempt, DaemonNext, attempt_of, daemon_next};
use crate::state::plan::Writes;
use crate::state::registry::Handler;

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

/// Runs the daemon `h` for one object until it ends for good or the task is aborted.
pub async fn run(ctx: Arc<ResourceContext>, h: Arc<Handler>, latest: watch::Receiver<Latest>) {
    let mut stop = ctx.stop.clone();
    tokio::select! { _ = stop.changed() => return, _ = tokio::time::sleep(h.daemon.initial_delay) => {} }
    let mut retry = 0u32;
    loop {
        // A daemon (re)starts only while no index is being filled.
        if !ctx.gate.is_open() {
            tokio::select! { _ = stop.changed() => return, _ = ctx.gate.opened() => {} }
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
        crate::engines::trace_context::record_trace_id(&span);
        let Some(ended) = one_run(&ctx, &h, &obj, &latest, &mut stop, req).instrument(span).await else { return };
        let next = match &ended {
            End::NoExit => DaemonNext::Done,
            End::Exit(attempt) => daemon_next(&h, Some(attempt)),
            End::Unreachable => daemon_next(&h, None),
        };
        match next {
            DaemonNext::Done => {
                let how = match &ended {
                    End::Exit(Attempt::Permanent(m) | Attempt::Unexpected { message: m, .. }) => m.clone(),
                    _ => "exited".into(),
                };
                ctx.log.info(Some(&obj), &format!("Daemon '{}' has exited: {how}", h.id));
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
                tokio::select! { _ = stop.changed() => return, _ = tokio::time::sleep(delay) => {} }
            }
        }
    }
}

/// One run of the daemon, from the call to its exit (or its stream's end); `None` when the
/// controller stops it.
async fn one_run(
    ctx: &ResourceContext,
    h: &Handler,
    obj: &ObjectRef,
    latest: &watch::Receiver<Latest>,
    stop: &mut watch::Receiver<bool>,
    req: pb::DaemonRequest,
) -> Option<End> {
    let mut stream = match ctx.servers[h.server].daemon(req).await {
        Err(failure) => {
            ctx.log.warn(Some(obj), &format!("Daemon '{}' could not be started: {failure}.", h.id));
            return Some(End::of(&failure.answer()));
        }
        Ok(stream) => stream,
    };
    loop {
        let next = tokio::select! {
            _ = stop.changed() => return None,
            n = stream.next() => n,
        };
        match next {
            None => return Some(End::NoExit),
            Some(Err(failure)) => {
                ctx.log.warn(Some(obj), &format!("Daemon '{}' {failure}.", h.id));
                return Some(End::of(&failure.answer()));
            }
            Some(Ok(message)) => {
                let body = latest.borrow().0.clone();
                if let Some(e) = apply(ctx, h, &body, message).await {
                    let given = Answer::Answered {
                        outcome: pb::Outcome::try_from(e.outcome).unwrap_or(pb::Outcome::UnexpectedError),
                        message: e.message,
                        delay: e.delay_seconds,
                    };
                    return Some(End::of(&given));
                }
            }
        }
    }
}

/// Applies one daemon message; returns the exit when it is one.
async fn apply(ctx: &ResourceContext, h: &Handler, body: &Value, message: pb::DaemonMessage) -> Option<pb::DaemonExit> {
    use pb::daemon_message::Message;
    let obj = object_ref(body);
    match message.message? {
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
                Ok(()) => {
                    if let Err(e) = ctx.write(body, &w).await {
                        ctx.log.warn(Some(&obj), &format!("Daemon '{}' could not patch the object: {e}", h.id));
                    }
                }
            }
        }
        Message::JsonPatch(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(p) if serde_json::from_value::<json_patch::Patch>(p.clone()).is_ok() => {
                let w = Writes { json_patches: vec![(h.id.clone(), p)], ..Writes::none() };
                if let Err(e) = ctx.write(body, &w).await {
                    ctx.log.warn(Some(&obj), &format!("Daemon '{}' could not patch the object: {e}", h.id));
                }
            }
            _ => ctx.log.warn(Some(&obj), &format!("Daemon '{}' sent an invalid JSON patch; ignored.", h.id)),
        },
        Message::Exit(exit) => return Some(exit),
    }
    None
}
