//! Daemons (Kopf's `kopf.daemon`): one `Daemon` stream per object and daemon handler, open for
//! as long as the object exists, is not being deleted and matches the handler's filters.
//! Cancelling the call (dropping the stream) is the daemon's stop signal. Messages apply as
//! they come: log lines, events, merge and JSON patches. A daemon that exits with a temporary
//! error (or an unexpected one, in the temporary errors mode) is restarted after its delay or
//! backoff; otherwise it stays stopped for that object until the controller restarts.

use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::cycle::{ResourceContext, object_ref};
use crate::engines::dispatch::{CallFailure, classify};
use crate::state::registry::{ErrorsMode, Handler};

/// What to do after a daemon's stream ended.
#[derive(Debug, PartialEq)]
pub enum Exit {
    /// Start it again after this long.
    Restart(Duration),
    /// Leave it stopped.
    Done,
}

/// Judges how a daemon ended (pure): `None` when the stream ended without an exit message.
pub fn judge(h: &Handler, exit: Option<&pb::DaemonExit>) -> Exit {
    let Some(exit) = exit else { return Exit::Done };
    let delay = exit.delay_seconds.filter(|d| d.is_finite() && *d >= 0.0).map(Duration::from_secs_f64);
    match pb::Outcome::try_from(exit.outcome).unwrap_or(pb::Outcome::UnexpectedError) {
        pb::Outcome::TemporaryError => Exit::Restart(delay.unwrap_or(h.backoff)),
        pb::Outcome::UnexpectedError if h.errors == ErrorsMode::Temporary => Exit::Restart(h.backoff),
        _ => Exit::Done,
    }
}

/// Runs the daemon `h` for one object until it ends for good or the task is aborted.
pub async fn run(ctx: Arc<ResourceContext>, h: Arc<Handler>, latest: watch::Receiver<(Value, tokio::time::Instant)>) {
    let mut stop = ctx.stop.clone();
    let mut retry = 0u32;
    loop {
        let body = latest.borrow().0.clone();
        let obj = object_ref(&body);
        let req = pb::DaemonRequest {
            handler_id: h.id.clone(),
            resource: Some(ctx.pb_resource()),
            object: serde_json::to_vec(&body).expect("JSON values serialize"),
            retry,
            memo: Vec::new(),
        };
        let server = &ctx.servers[h.server];
        ctx.log.debug(Some(&obj), &format!("Daemon '{}' is starting.", h.id));
        let mut exit = None;
        let restart = match server.daemon(req).await {
            Err(CallFailure::Unreachable(why)) | Err(CallFailure::Rejected(why)) => {
                ctx.log.warn(Some(&obj), &format!("Daemon '{}' could not be started: {why}. Will retry.", h.id));
                Exit::Restart(h.backoff.min(Duration::from_secs(10)))
            }
            Ok(mut stream) => {
                loop {
                    let next = tokio::select! {
                        _ = stop.changed() => return,
                        n = stream.next() => n,
                    };
                    match next {
                        None => break,
                        Some(Err(status)) => {
                            let why = match classify(&status) {
                                CallFailure::Unreachable(w) | CallFailure::Rejected(w) => w,
                            };
                            ctx.log.warn(Some(&obj), &format!("Daemon '{}' failed: {why}", h.id));
                            exit = Some(pb::DaemonExit { outcome: pb::Outcome::UnexpectedError as i32, message: why, delay_seconds: None });
                            break;
                        }
                        Some(Ok(message)) => {
                            let body = latest.borrow().0.clone();
                            if let Some(e) = apply(&ctx, &h, &body, message).await {
                                exit = Some(e);
                                break;
                            }
                        }
                    }
                }
                judge(&h, exit.as_ref())
            }
        };
        match restart {
            Exit::Done => {
                let how = exit.as_ref().map(|e| e.message.as_str()).filter(|m| !m.is_empty()).unwrap_or("exited");
                ctx.log.info(Some(&obj), &format!("Daemon '{}' has exited: {how}", h.id));
                return;
            }
            Exit::Restart(delay) => {
                ctx.log.warn(Some(&obj), &format!("Daemon '{}' will be restarted in {delay:?}.", h.id));
                retry += 1;
                tokio::select! { _ = stop.changed() => return, _ = tokio::time::sleep(delay) => {} }
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
        Message::MergePatch(bytes) => match serde_json::from_slice::<Value>(&bytes).ok().filter(Value::is_object) {
            None => ctx.log.warn(Some(&obj), &format!("Daemon '{}' sent a merge patch that is not a JSON object; ignored.", h.id)),
            Some(patch) => {
                let (mut main, mut status) = (json!({}), json!({}));
                ctx.add_patch(&patch, &mut main, &mut status);
                if let Err(e) = ctx.write(body, main, status, None, &[]).await {
                    ctx.log.warn(Some(&obj), &format!("Daemon '{}' could not patch the object: {e:?}", h.id));
                }
            }
        },
        Message::JsonPatch(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(p) if serde_json::from_value::<json_patch::Patch>(p.clone()).is_ok() => {
                if let Err(e) = ctx.write(body, json!({}), json!({}), None, &[(h.id.as_str(), &p)]).await {
                    ctx.log.warn(Some(&obj), &format!("Daemon '{}' could not patch the object: {e:?}", h.id));
                }
            }
            _ => ctx.log.warn(Some(&obj), &format!("Daemon '{}' sent an invalid JSON patch; ignored.", h.id)),
        },
        Message::Exit(exit) => return Some(exit),
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(errors: ErrorsMode) -> Handler {
        let spec = pb::HandlerSpec {
            id: "d".into(),
            kind: pb::HandlerKind::Daemon as i32,
            resource: Some(pb::ResourceSelector { name: "kex".into(), ..Default::default() }),
            ..Default::default()
        };
        let mut h = Handler::from_spec(&spec, 0).unwrap();
        h.errors = errors;
        h
    }

    fn exit(outcome: pb::Outcome, delay: Option<f64>) -> pb::DaemonExit {
        pb::DaemonExit { outcome: outcome as i32, message: String::new(), delay_seconds: delay }
    }

    #[test]
    fn daemon_exits_decide_restarts() {
        let s = Duration::from_secs;
        let cases = [
            (ErrorsMode::Temporary, None, Exit::Done),
            (ErrorsMode::Temporary, Some(exit(pb::Outcome::Success, None)), Exit::Done),
            (ErrorsMode::Temporary, Some(exit(pb::Outcome::TemporaryError, Some(2.0))), Exit::Restart(s(2))),
            (ErrorsMode::Temporary, Some(exit(pb::Outcome::TemporaryError, None)), Exit::Restart(s(60))),
            (ErrorsMode::Temporary, Some(exit(pb::Outcome::PermanentError, None)), Exit::Done),
            (ErrorsMode::Temporary, Some(exit(pb::Outcome::UnexpectedError, None)), Exit::Restart(s(60))),
            (ErrorsMode::Permanent, Some(exit(pb::Outcome::UnexpectedError, None)), Exit::Done),
        ];
        for (mode, e, want) in cases {
            assert_eq!(judge(&handler(mode), e.as_ref()), want, "{mode:?} {e:?}");
        }
    }
}
