//! One handling cycle of one object, executed: the plan (`state::plan`) decides, this module
//! calls the handler servers the plan names, creates owned objects, writes what the plan
//! computed, and tells the plan whose patch the API server refused.
//!
//! A cycle runs within its object's [`Turn`] and checks it before each handler call and each
//! write: once the object is not ours (a shard handed over, a peering pause, a revocation) the
//! cycle stops there, progress already written stays, and the next owner carries on from it.
//! A voluntary handover lets the handler call in flight finish (the new owner waits for the
//! turn to end, `Authority::settled`); its answer is not written, so the next owner calls that
//! handler again (calls are at-least-once). Only a revocation — ownership lost by force, when
//! another replica may start soon — cuts a call: the worker drops the cycle's future at once,
//! which cancels the gRPC call (the handler server sees a cancelled RPC) and any write in
//! flight; a write already on the wire may still land, nothing is sent after it.

use std::sync::Arc;

use bosun_proto::v1 as pb;
use serde_json::Value;

use super::background::{Background, is_background};
use super::context::{ResourceContext, to_json};
use super::owned;
use super::queues::key_of;
use super::writes::{self, WriteError};
use crate::cluster::events;
use crate::cluster::posting;
use crate::coordination::Turn;
use crate::handlers::dispatch::CallFailure;
use crate::logs::{Level, Line};
use crate::object::{self, object_ref};
use crate::state::causes::Reason;
use crate::state::diff::DiffOp;
use crate::state::essence::essence;
use crate::state::outcomes::Answer;
use crate::state::plan::{self, Cycle, Invocation, Next, Start, deletion_requested};
use tracing::Instrument;

/// The end of a cycle: what comes next and the newest body the cycle knows of.
#[derive(Debug)]
pub struct CycleEnd {
    /// What the worker does next.
    pub next: Next,
    /// The body returned by the last write, if any (newer than the event's).
    pub written: Option<Value>,
    /// Stopped daemons of the object have not ended yet: notified when they have, and the
    /// object is looked at again then (its finalizer released, its daemons started again).
    pub released: Option<Arc<tokio::sync::Notify>>,
}

impl CycleEnd {
    fn then(next: Next, written: Option<Value>) -> CycleEnd {
        CycleEnd { next, written, released: None }
    }
}

/// Whether a cycle may take its next step (a handler call, a write): its turn is current
/// (a deleted object's cycle has none and writes nothing but to release it).
fn current(turn: Option<&Turn>) -> bool {
    turn.is_none_or(Turn::is_current)
}

fn pb_reason(r: Reason) -> pb::Reason {
    match r {
        Reason::Create => pb::Reason::Create,
        Reason::Update => pb::Reason::Update,
        Reason::Delete => pb::Reason::Delete,
        Reason::Resume => pb::Reason::Resume,
        _ => pb::Reason::Unspecified,
    }
}

/// Logs a cycle's lines about `body` with its prefix, and posts those the posting settings
/// say as events about it (Kopf's object logger).
fn say_all(ctx: &ResourceContext, body: &Value, lines: Vec<Line>) {
    if lines.is_empty() {
        return;
    }
    ctx.log.lines(Some(&object_ref(body)), &lines);
    let mut regarding = None;
    for line in lines.iter().filter(|l| ctx.posting.posts_line(l.level)) {
        let to = regarding.get_or_insert_with(|| events::Regarding::of(body)).clone();
        ctx.poster.post(to, posting::line_event(line));
    }
}

/// Logs one line of a cycle, as [`say_all`].
fn say(ctx: &ResourceContext, body: &Value, level: Level, text: String) {
    say_all(ctx, body, vec![Line::new(level, text)]);
}

/// Whether a cycle's line of `level` is read: logged, or posted as an event.
fn reads(ctx: &ResourceContext, level: Level) -> bool {
    ctx.log.enabled(level) || ctx.posting.posts_line(level)
}

/// Runs one cycle for `body` (`deleted`: the watch said DELETED) within `turn` (none for a
/// deleted object): it stops before a handler call or a write once the turn is not current.
pub async fn process(ctx: &Arc<ResourceContext>, background: &Background, body: &Value, deleted: bool, turn: Option<&Turn>) -> CycleEnd {
    let uid = object::meta_str(body, "uid").to_string();
    let key = key_of(body);
    if deleted {
        background.stop(&key, ctx.clock.now());
        // Under a pushed-down label selector, an object that merely stopped matching is
        // reported DELETED; if it still carries our finalizer, release it, or its real
        // deletion would wait for a controller that no longer sees it.
        if ctx.selector_pushed && ctx.storage.has_finalizer(body) {
            let path = writes::path_of(&ctx.resource, body);
            if let Ok(current) = ctx.api.get(&path).await
                && object::meta_str(&current, "uid") == uid
            {
                return Box::pin(process(ctx, background, &current, false, turn)).await;
            }
        }
        // Kopf's goodbye, for the objects this resource's handlers are for.
        if reads(ctx, Level::Debug) && (ctx.storage.has_finalizer(body) || ctx.handlers.iter().any(|h| h.matches_object(body))) {
            say_all(ctx, body, Reason::Gone.idle_line().into_iter().collect());
        }
        ctx.seen.lock().remove(&uid);
        ctx.memos.lock().remove(&uid);
        return CycleEnd::then(Next::Gone, None);
    }
    let has_finalizer = ctx.storage.has_finalizer(body);
    // Timers and daemons need the essence first; the plan reuses it.
    let (mut held, mut known_essence) = (None, None);
    if ctx.handlers.iter().any(|h| is_background(h)) {
        let deleting = deletion_requested(body);
        let matching: Vec<_> = ctx.handlers.iter().filter(|h| is_background(h) && !deleting && h.matches_object(body)).cloned().collect();
        let e = essence(body, &ctx.rules);
        held = background.sync(ctx, &key, body, &e, &matching, has_finalizer);
        known_essence = Some(e);
    }
    let hold = held.as_ref().map(|h| h.until);
    let mut end = handle(ctx, body, &uid, known_essence, hold, turn).await;
    end.released = held.map(|h| h.released);
    end
}

/// Runs the cycle's handlers for `body` and writes what the plan concludes; `hold`: stopped
/// daemons of the object keep its finalizer until then at least.
async fn handle(
    ctx: &ResourceContext,
    body: &Value,
    uid: &str,
    known_essence: Option<Value>,
    hold: Option<chrono::DateTime<chrono::Utc>>,
    turn: Option<&Turn>,
) -> CycleEnd {
    let obj = object_ref(body);
    let uid = uid.to_string();
    let subject = ctx.subject();
    let first_sight = !ctx.seen.lock().contains(&uid);
    let mut cycle = match plan::begin(&subject, body, known_essence, first_sight, ctx.clock.now()) {
        Start::Idle(lines) => {
            say_all(ctx, body, lines);
            ctx.seen.lock().insert(uid);
            return CycleEnd::then(Next::Idle, None);
        }
        Start::AddFinalizer(writes, lines) => {
            say_all(ctx, body, lines);
            if !current(turn) {
                return not_ours(ctx, body);
            }
            return match ctx.write(body, &writes).await {
                Ok(written) => CycleEnd::then(Next::Now, written),
                Err(e) => failed_write(ctx, body, e),
            };
        }
        Start::Handle(cycle) => cycle,
    };
    // Kopf's lines of every cycle: the body in progress (and the diff), built only if read.
    if reads(ctx, Level::Debug) {
        say_all(ctx, body, crate::state::causes::progress_lines(cycle.reason, body, &cycle.diff));
    }
    let labels = crate::metrics::CauseLabels { resource: ctx.resource.metrics_label(), cause: cycle.reason.purpose() };
    crate::metrics::global().causes.get_or_create(&labels).inc();
    // The cause and each handler are spans: log lines within carry them (`--log-format json`).
    let span = tracing::info_span!(
        "cycle",
        otel.name = %format_args!("{} {}", cycle.reason.purpose(), obj.path()),
        namespace = %obj.namespace,
        name = %obj.name,
        cause = cycle.reason.purpose(),
        trace_id = tracing::field::Empty,
    );
    crate::handlers::trace_context::record_trace_id(&span);
    let handling = async {
        while let Some(inv) = cycle.next_call() {
            if !current(turn) {
                return not_ours(ctx, body);
            }
            let handler =
                tracing::info_span!("handler", otel.name = %format_args!("handler {}", inv.id), otel.kind = "client", handler = %inv.id);
            handler.in_scope(|| say_all(ctx, body, cycle.take_lines()));
            let mut reply = call(ctx, &cycle, &inv, body, &uid).instrument(handler.clone()).await;
            if let Ok(answer) = &mut reply
                && answer.outcome == pb::Outcome::Success as i32
                && !answer.owned.is_empty()
                && current(turn)
            {
                adopt_into(ctx, body, answer).instrument(handler.clone()).await;
            }
            cycle.absorb(&subject, body, &inv, reply);
            handler.in_scope(|| say_all(ctx, body, cycle.take_lines()));
        }
        finish(ctx, &mut cycle, body, &uid, hold, turn).await
    };
    handling.instrument(span).await
}

/// Writes what the cycle concluded; when the API server refuses it, finds the handlers
/// whose patches it refuses, fails only them, and writes again.
async fn finish(
    ctx: &ResourceContext,
    cycle: &mut Cycle,
    body: &Value,
    uid: &str,
    hold: Option<chrono::DateTime<chrono::Utc>>,
    turn: Option<&Turn>,
) -> CycleEnd {
    let subject = ctx.subject();
    loop {
        let (writes, next) = cycle.conclude(&subject, body, hold);
        let lines = cycle.take_lines();
        if !current(turn) {
            say_all(ctx, body, lines);
            return not_ours(ctx, body);
        }
        match ctx.write(body, &writes).await {
            Ok(written) => {
                say_all(ctx, body, lines);
                ctx.post_events(body, writes.events.iter()).await;
                if !cycle.unreachable() {
                    ctx.seen.lock().insert(uid.to_string());
                }
                return CycleEnd::then(next, written);
            }
            Err(WriteError::Rejected(message)) => {
                let culprits = writes::culprits(&*ctx.api, &writes::path_of(&ctx.resource, body), cycle.calls()).await;
                if culprits.is_empty() {
                    say_all(ctx, body, lines);
                    return refused_state(ctx, body, &message);
                }
                cycle.reject(&culprits, &message);
                say_all(ctx, body, cycle.take_lines());
            }
            Err(WriteError::Conflict(_)) if next == Next::Idle => {
                // The cause was done: the status write that landed purged its progress, and
                // the diffbase did not follow. The object as read shows neither, which would
                // run every handler of the cause again: the next cycle runs on the body from
                // before this one instead, whose progress says which handlers are done.
                say_all(ctx, body, lines);
                return failed_write(ctx, body, WriteError::Conflict(None));
            }
            Err(e) => {
                say_all(ctx, body, lines);
                return failed_write(ctx, body, e);
            }
        }
    }
}

/// The end of a cycle stopped because its object is not ours now (handed over, paused, or
/// revoked): what was written stays, and its owner carries on from there.
fn not_ours(ctx: &ResourceContext, body: &Value) -> CycleEnd {
    say(ctx, body, Level::Debug, "Not ours now (handed over or paused); the cycle stops here.".into());
    CycleEnd::then(Next::Idle, None)
}

/// The API server refused the controller's own writes (no handler's patch is at fault).
fn refused_state(ctx: &ResourceContext, body: &Value, message: &str) -> CycleEnd {
    say(ctx, body, Level::Error, format!("The API server refused the controller's state for this object: {message}. Will retry."));
    CycleEnd::then(Next::Throttled(None), None)
}

fn failed_write(ctx: &ResourceContext, body: &Value, e: WriteError) -> CycleEnd {
    match e {
        WriteError::Gone => CycleEnd::then(Next::Gone, None),
        WriteError::Conflict(newest) => {
            say(ctx, body, Level::Debug, "The object changed meanwhile; waiting for its newer version.".into());
            CycleEnd::then(Next::WakeAt(ctx.clock.now() + chrono::Duration::seconds(1)), newest.map(|b| *b))
        }
        WriteError::Rejected(message) | WriteError::Unavailable(message) => {
            say(ctx, body, Level::Error, format!("Patching failed: {message}. Will retry."));
            CycleEnd::then(Next::Throttled(None), None)
        }
    }
}

/// Calls one (sub-)handler once.
async fn call(ctx: &ResourceContext, cycle: &Cycle, inv: &Invocation, body: &Value, uid: &str) -> Result<pb::HandleResponse, Answer> {
    let due = cycle.due(inv.due);
    let h = &due.handler;
    let now = cycle.now;
    let runtime = (now - inv.started).to_std().unwrap_or_default();
    let memo = ctx.memos.lock().get(uid).cloned().unwrap_or_default();
    let req = pb::HandleRequest {
        handler_id: inv.id.clone(),
        reason: pb_reason(cycle.reason) as i32,
        resource: Some(ctx.pb_resource()),
        object: to_json(body),
        old: due.old.as_ref().map(to_json).unwrap_or_default(),
        new: due.new.as_ref().map(to_json).unwrap_or_default(),
        diff: cycle
            .diff
            .iter()
            .map(|d| pb::DiffItem {
                operation: match d.op {
                    DiffOp::Add => pb::diff_item::Operation::Add,
                    DiffOp::Change => pb::diff_item::Operation::Change,
                    DiffOp::Remove => pb::diff_item::Operation::Remove,
                } as i32,
                path: d.path.clone(),
                old: d.old.as_ref().map(to_json).unwrap_or_default(),
                new: d.new.as_ref().map(to_json).unwrap_or_default(),
            })
            .collect(),
        retry: inv.retry,
        started: Some(bosun_proto::prost_types::Timestamp {
            seconds: inv.started.timestamp(),
            nanos: inv.started.timestamp_subsec_nanos() as i32,
        }),
        runtime: Some(bosun_proto::prost_types::Duration {
            seconds: runtime.as_secs().min(i64::MAX as u64) as i64,
            nanos: runtime.subsec_nanos() as i32,
        }),
        param: inv.param.as_ref().map(to_json).unwrap_or_default(),
        memo,
        event_type: String::new(),
        parent_id: inv.parent.clone().unwrap_or_default(),
        subhandler_id: inv
            .parent
            .as_deref()
            .and_then(|p| inv.id.strip_prefix(p))
            .map(|c| c.trim_start_matches('/').to_string())
            .unwrap_or_default(),
        // Sub-handlers are called through their top-level handler's registration.
        handler_key: h.key.clone(),
        finished_subhandlers: inv.finishes.clone(),
    };
    let server = &ctx.servers[h.server];
    let result = server.handle(req, h.call_timeout).await;
    match &result {
        Err(failure @ CallFailure::Unreachable(_)) => {
            if ctx.outages.down(server.addr(), &key_of(body)) {
                ctx.log.warn(
                    None,
                    &format!("Handler server {} is unreachable: {failure}. The objects that need it wait for it.", server.addr()),
                );
            }
        }
        // A lost connection or a call cut by its deadline says nothing of the server now.
        Err(CallFailure::Lost(_) | CallFailure::TimedOut(_)) => {}
        Ok(_) | Err(CallFailure::Failed { .. }) => {
            if let Some(n) = ctx.outages.up(server.addr()) {
                ctx.log.info(None, &format!("Handler server {} answers again; {n} object(s) waited for it.", server.addr()));
            }
        }
    }
    match result {
        Ok(answer) => {
            if !answer.memo.is_empty() {
                ctx.memos.lock().insert(uid.to_string(), answer.memo.clone());
            }
            Ok(answer)
        }
        Err(failure) => Err(failure.answer()),
    }
}

/// Creates and adopts a successful answer's owned objects; their UIDs join the result
/// as `children` (Kopf's example 02 shape). A failure turns the answer into an
/// unexpected error of the handler, so its errors mode decides what follows.
async fn adopt_into(ctx: &ResourceContext, body: &Value, answer: &mut pb::HandleResponse) {
    match owned::adopt(&*ctx.api, &ctx.kinds, body, &answer.owned).await {
        Ok(uids) => {
            let parsed = serde_json::from_slice::<Value>(&answer.result).ok().filter(|v| !v.is_null());
            let mut result = parsed.unwrap_or_else(|| serde_json::json!({}));
            if let Some(map) = result.as_object_mut() {
                map.insert("children".into(), serde_json::json!(uids));
                answer.result = to_json(&result);
            }
            say(ctx, body, Level::Info, format!("Adopted and created {} owned object(s).", uids.len()));
        }
        Err(why) => {
            answer.outcome = pb::Outcome::UnexpectedError as i32;
            answer.message = format!("owned objects could not be created: {why}");
        }
    }
}
