//! Operator-level activities (Kopf's `on.startup`, `on.cleanup`): every startup handler must
//! succeed before any watching starts (temporary errors are retried after their delay or the
//! handler's backoff; a permanent failure stops the controller), and the operator settings they
//! changed are gathered; cleanup handlers run once each when the controller stops.

use bosun_proto::v1 as pb;

use crate::handlers::dispatch::HandlerClient;
use crate::logs::Logger;
use crate::logs::human;
use crate::state::outcomes::{ActivityNext, Answer, activity_next, attempt_of};
use crate::state::registry::Handler;

/// A startup handler failed for good.
#[derive(Debug, thiserror::Error)]
#[error("startup handler '{id}' failed permanently: {message}")]
pub struct StartupFailed {
    /// The handler.
    pub id: String,
    /// Why.
    pub message: String,
}

/// One attempt, judged: its lines are logged, the answer interpreted; with the settings it
/// changed, if it answered.
async fn attempt(
    h: &Handler,
    servers: &[std::sync::Arc<dyn HandlerClient>],
    log: &Logger,
    retry: u32,
) -> (ActivityNext, Option<pb::OperatorSettings>) {
    let req = pb::ActivityRequest { handler_id: h.id.clone(), kind: h.kind as i32, retry, handler_key: h.key.clone() };
    match servers[h.server].activity(req, h.call_timeout).await {
        Ok(a) => {
            log_lines(log, &a);
            let outcome = pb::Outcome::try_from(a.outcome).unwrap_or(pb::Outcome::UnexpectedError);
            let given = Answer::Answered { outcome, message: a.message, delay: a.delay_seconds };
            (activity_next(h, attempt_of(&given, None).as_ref(), "", retry), a.settings)
        }
        Err(failure) => (activity_next(h, attempt_of(&failure.answer(), None).as_ref(), &failure.to_string(), retry), None),
    }
}

fn log_lines(log: &Logger, answer: &pb::ActivityResponse) {
    for line in &answer.logs {
        log.line(crate::logs::Level::of_pb(line.level), None, &line.message);
    }
}

/// Runs every startup handler to success, in order; returns the operator settings their
/// successful attempts changed, a later handler's over an earlier one's.
pub async fn startup(
    handlers: &[&Handler],
    servers: &[std::sync::Arc<dyn HandlerClient>],
    log: &Logger,
) -> Result<pb::OperatorSettings, StartupFailed> {
    let mut settings = pb::OperatorSettings::default();
    for h in handlers {
        let mut retry = 0;
        loop {
            match attempt(h, servers, log, retry).await {
                (ActivityNext::Succeeded, changed) => {
                    log.info(None, &format!("Activity '{}' succeeded.", h.id));
                    if let Some(changed) = changed {
                        crate::settings::from_servers::merge(&mut settings, &changed);
                    }
                    break;
                }
                (ActivityNext::Failed(message), _) => {
                    log.error(None, &format!("Activity '{}' failed permanently: {message}", h.id));
                    return Err(StartupFailed { id: h.id.clone(), message });
                }
                (ActivityNext::Retry(delay, message), _) => {
                    log.warn(None, &format!("Activity '{}' failed temporarily: {message}; retrying in {}.", h.id, human(delay)));
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
            }
        }
    }
    Ok(settings)
}

/// Runs every cleanup handler once (best effort: the controller is stopping).
pub async fn cleanup(handlers: &[&Handler], servers: &[std::sync::Arc<dyn HandlerClient>], log: &Logger) {
    for h in handlers {
        match attempt(h, servers, log, 0).await.0 {
            ActivityNext::Succeeded => log.info(None, &format!("Activity '{}' succeeded.", h.id)),
            ActivityNext::Failed(m) | ActivityNext::Retry(_, m) => log.warn(None, &format!("Activity '{}' failed: {m}", h.id)),
        }
    }
}
