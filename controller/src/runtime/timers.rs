//! Timers (Kopf's `kopf.timer`): per object and timer handler, a task that calls the handler
//! every `interval` (after `initial_delay`; only once the object has been unchanged for `idle`;
//! `sharp` keeps the schedule from each call's start) for as long as `background` keeps it.
//! Results and patches are written like a cycle's; failures are retried after their delay or
//! the handler's backoff.

use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::context::Latest;
use super::context::{ResourceContext, to_json};
use crate::coordination::Turn;
use crate::object::object_ref;
use crate::state::outcomes::{Answer, Attempt, TimerNext, attempt_of, timer_next};
use crate::state::plan::Writes;
use crate::state::registry::Handler;

/// Runs the timer `h` for one object until its task is aborted, the controller stops, or its
/// `turn` is not current (revoked: at once, its call in flight cancelled; handed over or
/// paused: at its next call or write).
pub async fn run(ctx: Arc<ResourceContext>, h: Arc<Handler>, latest: watch::Receiver<Latest>, turn: &Turn) {
    tokio::select! {
        biased;
        _ = turn.revoked() => {}
        _ = ticking(ctx, h, latest, turn) => {}
    }
}

/// The timer's loop, as [`run`] says.
async fn ticking(ctx: Arc<ResourceContext>, h: Arc<Handler>, mut latest: watch::Receiver<Latest>, turn: &Turn) {
    let mut stop = ctx.stop.clone();
    let t = h.timer;
    let sleep = |d: Duration| tokio::time::sleep(d);
    tokio::select! { _ = stop.changed() => return, _ = sleep(t.initial_delay) => {} }
    loop {
        if !t.idle.is_zero() {
            loop {
                let quiet = latest.borrow().1.elapsed();
                if quiet >= t.idle {
                    break;
                }
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = sleep(t.idle - quiet) => {}
                    _ = latest.changed() => {}
                }
            }
        }
        // While an index is (re)filled, no handler runs, timers included.
        if !ctx.gate.is_open() {
            tokio::select! { _ = stop.changed() => return, _ = ctx.gate.opened() => {} }
        }
        let started = Instant::now();
        let body = latest.borrow().0.clone();
        let wait = match tick(&ctx, &h, &body, turn).await {
            None => return,
            Some(TimerNext::Interval) if t.sharp => t.interval.saturating_sub(started.elapsed()),
            Some(TimerNext::Interval) => t.interval,
            Some(TimerNext::Retry(d)) => d,
        };
        tokio::select! { _ = stop.changed() => return, _ = sleep(wait) => {} }
    }
}

/// Calls the timer once and writes what it returned; `None` when the object is not ours now.
async fn tick(ctx: &ResourceContext, h: &Handler, body: &Value, turn: &Turn) -> Option<TimerNext> {
    let obj = object_ref(body);
    if !turn.is_current() {
        return None;
    }
    let req = pb::HandleRequest {
        handler_id: h.id.clone(),
        handler_key: h.key.clone(),
        reason: pb::Reason::Timer as i32,
        resource: Some(ctx.pb_resource()),
        object: to_json(body),
        ..Default::default()
    };
    let answer = match ctx.servers[h.server].handle(req, h.call_timeout).await {
        Ok(a) => a,
        Err(failure) => {
            let attempt = attempt_of(&failure.answer(), None);
            ctx.log.warn(Some(&obj), &format!("Timer '{}' {failure}. Will retry.", h.id));
            return Some(timer_next(h, attempt.as_ref()));
        }
    };
    ctx.log_lines(&obj, &answer.logs);
    let outcome = pb::Outcome::try_from(answer.outcome).unwrap_or(pb::Outcome::UnexpectedError);
    let given = Answer::Answered { outcome, message: answer.message.clone(), delay: answer.delay_seconds };
    let attempt = attempt_of(&given, None).expect("an answer is an attempt");
    match &attempt {
        Attempt::Success(_) => ctx.log.info(Some(&obj), &format!("Timer '{}' succeeded.", h.id)),
        Attempt::Skipped => {}
        Attempt::Temporary { message, .. } => ctx.log.warn(Some(&obj), &format!("Timer '{}' failed temporarily: {message}", h.id)),
        Attempt::Permanent(m) => ctx.log.error(Some(&obj), &format!("Timer '{}' failed permanently: {m}", h.id)),
        Attempt::Unexpected { message: m, .. } => ctx.log.warn(Some(&obj), &format!("Timer '{}' failed with an exception: {m}", h.id)),
    }
    if !turn.is_current() {
        ctx.log.debug(Some(&obj), &format!("Timer '{}' is not written: the object is not ours now.", h.id));
        return None;
    }
    if matches!(attempt, Attempt::Success(_)) {
        let subject = ctx.subject();
        let mut w = Writes::none();
        if let Some(m) = serde_json::from_slice::<Value>(&answer.merge_patch).ok().filter(Value::is_object)
            && let Err(why) = subject.add_checked_patch(body, &m, &mut w)
        {
            ctx.log.warn(Some(&obj), &format!("Timer '{}' returned a patch that is not applied: {why}", h.id));
        }
        if let Some(result) = serde_json::from_slice::<Value>(&answer.result).ok().filter(|v| !v.is_null()) {
            subject.add_result(body, &h.id, &result, &mut w.main, &mut w.status);
        }
        if let Err(e) = ctx.write(body, &w).await {
            ctx.log.warn(Some(&obj), &format!("Timer '{}' could not write its result: {e}", h.id));
        }
    }
    ctx.post_events(body, answer.events.iter()).await;
    Some(timer_next(h, Some(&attempt)))
}
