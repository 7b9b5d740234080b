//! Operator-level activities (Kopf's `on.startup`, `on.cleanup`): every startup handler must
//! succeed before any watching starts (temporary errors are retried after their delay or the
//! handler's backoff; a permanent failure stops the controller); cleanup handlers run once each
//! when the controller stops.

use std::time::Duration;

use bosun_proto::v1 as pb;

use crate::engines::dispatch::{CallFailure, Server};
use crate::logs::Logger;
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

/// What an activity attempt means.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Done.
    Succeeded,
    /// Try again after this long.
    Retry(Duration, String),
    /// Give up.
    Failed(String),
}

/// Judges one activity answer (pure).
pub fn judge(h: &Handler, answer: Result<&pb::ActivityResponse, &CallFailure>, retry: u32) -> Step {
    let limit_hit = h.retries.is_some_and(|limit| retry + 1 >= limit);
    let retry_or_fail = |delay: Duration, message: String| {
        if limit_hit { Step::Failed(format!("{message} (retries exhausted)")) } else { Step::Retry(delay, message) }
    };
    match answer {
        Err(CallFailure::Unreachable(why)) => {
            Step::Retry(h.backoff.min(Duration::from_secs(5)), format!("handler server unreachable: {why}"))
        }
        Err(CallFailure::Rejected(why)) => retry_or_fail(h.backoff, why.clone()),
        Ok(a) => match pb::Outcome::try_from(a.outcome).unwrap_or(pb::Outcome::UnexpectedError) {
            pb::Outcome::Success | pb::Outcome::Skipped => Step::Succeeded,
            pb::Outcome::PermanentError => Step::Failed(a.message.clone()),
            pb::Outcome::TemporaryError => {
                let delay = a.delay_seconds.filter(|d| d.is_finite() && *d >= 0.0).map(Duration::from_secs_f64).unwrap_or(h.backoff);
                retry_or_fail(delay, a.message.clone())
            }
            pb::Outcome::UnexpectedError => match h.errors {
                crate::state::registry::ErrorsMode::Ignored => Step::Succeeded,
                crate::state::registry::ErrorsMode::Permanent => Step::Failed(a.message.clone()),
                crate::state::registry::ErrorsMode::Temporary => retry_or_fail(h.backoff, a.message.clone()),
            },
        },
    }
}

async fn attempt(h: &Handler, servers: &[Server], retry: u32) -> Result<pb::ActivityResponse, CallFailure> {
    let req = pb::ActivityRequest { handler_id: h.id.clone(), kind: h.kind as i32, retry };
    servers[h.server].activity(req, h.call_timeout).await
}

fn log_lines(log: &Logger, answer: &pb::ActivityResponse) {
    for line in &answer.logs {
        match pb::log_line::Level::try_from(line.level).unwrap_or_default() {
            pb::log_line::Level::Debug => log.debug(None, &line.message),
            pb::log_line::Level::Info => log.info(None, &line.message),
            pb::log_line::Level::Warning => log.warn(None, &line.message),
            pb::log_line::Level::Error => log.error(None, &line.message),
        }
    }
}

/// Runs every startup handler to success, in order.
pub async fn startup(handlers: &[&Handler], servers: &[Server], log: &Logger) -> Result<(), StartupFailed> {
    for h in handlers {
        let mut retry = 0;
        loop {
            let answer = attempt(h, servers, retry).await;
            if let Ok(a) = &answer {
                log_lines(log, a);
            }
            match judge(h, answer.as_ref(), retry) {
                Step::Succeeded => {
                    log.info(None, &format!("Activity '{}' succeeded.", h.id));
                    break;
                }
                Step::Failed(message) => {
                    log.error(None, &format!("Activity '{}' failed permanently: {message}", h.id));
                    return Err(StartupFailed { id: h.id.clone(), message });
                }
                Step::Retry(delay, message) => {
                    log.warn(None, &format!("Activity '{}' failed temporarily: {message}; retrying in {delay:?}.", h.id));
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
            }
        }
    }
    Ok(())
}

/// Runs every cleanup handler once (best effort: the controller is stopping).
pub async fn cleanup(handlers: &[&Handler], servers: &[Server], log: &Logger) {
    for h in handlers {
        let answer = attempt(h, servers, 0).await;
        if let Ok(a) = &answer {
            log_lines(log, a);
        }
        match judge(h, answer.as_ref(), 0) {
            Step::Succeeded => log.info(None, &format!("Activity '{}' succeeded.", h.id)),
            Step::Failed(m) | Step::Retry(_, m) => log.warn(None, &format!("Activity '{}' failed: {m}", h.id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(retries: Option<u32>) -> Handler {
        let spec = pb::HandlerSpec { id: "boot".into(), kind: pb::HandlerKind::Startup as i32, ..Default::default() };
        let mut h = Handler::from_spec(&spec, 0).unwrap();
        h.retries = retries;
        h
    }

    fn answer(outcome: pb::Outcome, delay: Option<f64>) -> pb::ActivityResponse {
        pb::ActivityResponse { outcome: outcome as i32, message: "m".into(), delay_seconds: delay, ..Default::default() }
    }

    #[test]
    fn activity_answers_become_steps() {
        let s = Duration::from_secs;
        let cases = [
            (handler(None), Ok(answer(pb::Outcome::Success, None)), 0, Step::Succeeded),
            (handler(None), Ok(answer(pb::Outcome::TemporaryError, Some(2.0))), 0, Step::Retry(s(2), "m".into())),
            (handler(None), Ok(answer(pb::Outcome::TemporaryError, None)), 0, Step::Retry(s(60), "m".into())),
            (handler(Some(3)), Ok(answer(pb::Outcome::TemporaryError, Some(1.0))), 2, Step::Failed("m (retries exhausted)".into())),
            (handler(None), Ok(answer(pb::Outcome::PermanentError, None)), 0, Step::Failed("m".into())),
            (handler(None), Ok(answer(pb::Outcome::UnexpectedError, None)), 0, Step::Retry(s(60), "m".into())),
            (handler(None), Err(CallFailure::Unreachable("down".into())), 0, Step::Retry(s(5), "handler server unreachable: down".into())),
        ];
        for (h, a, retry, want) in cases {
            assert_eq!(judge(&h, a.as_ref(), retry), want, "{a:?}");
        }
    }
}
