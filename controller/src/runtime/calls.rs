//! The calling phase of a cycle: each due handler (and each sub-handler it registered) that
//! is neither finished nor delayed is called once; answers become progress records, results,
//! patches, events and log lines. Sub-handlers get ids `parent/child`, their own records
//! (with the parent's parameter kept in the record, so a restarted controller can call them
//! again without the parent), and the parent counts as finished only when all of them are.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use bosun_proto::v1 as pb;
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde_json::Value;

use super::cycle::ResourceContext;
use crate::engines::dispatch::CallFailure;
use crate::logs::ObjectRef;
use crate::state::causes::Reason;
use crate::state::diff::{DiffItem, DiffOp};
use crate::state::outcomes::{Attempt, Verdict, precheck, record_attempt, record_limit_failure};
use crate::state::progress::{ProgressRecord, format_time};
use crate::state::registry::Handler;

/// What one call produced.
pub struct Call {
    /// The (sub-)handler id.
    pub id: String,
    /// How it ended.
    pub verdict: Verdict,
    /// The result to store at `status.<id>`.
    pub result: Option<Value>,
    /// Its merge patch of the main resource.
    pub main_patch: Option<Value>,
    /// Its merge patch of the status (`{"status": …}`).
    pub status_patch: Option<Value>,
    /// Its JSON patch.
    pub json_patch: Option<Value>,
    /// Events to post.
    pub events: Vec<pb::Event>,
}

impl Call {
    /// Whether the call changes the object (so a rejected write may be its fault).
    pub fn patches(&self) -> bool {
        self.main_patch.is_some() || self.status_patch.is_some() || self.json_patch.is_some()
    }
}

/// A handler answer's result, merge patch and JSON patch, parsed.
type Parsed = (Option<Value>, Option<Value>, Option<Value>);

/// The state of one cycle's calling phase.
pub struct Round<'a> {
    /// The resource.
    pub ctx: &'a ResourceContext,
    /// The cause.
    pub reason: Reason,
    /// The object as seen.
    pub body: &'a Value,
    /// Its UID.
    pub uid: &'a str,
    /// Its log prefix.
    pub obj: ObjectRef,
    /// The essence diff (updates).
    pub diff: &'a [DiffItem],
    /// The cycle's clock.
    pub now: DateTime<Utc>,
    /// Progress records of this cause, by (sub-)handler id.
    pub records: BTreeMap<String, ProgressRecord>,
    /// Calls made.
    pub calls: Vec<Call>,
    /// Handlers skipped by their `when` filter.
    pub skipped: HashSet<String>,
    /// The earliest delay.
    pub wake: Option<DateTime<Utc>>,
    /// A handler server could not be reached.
    pub unreachable: bool,
}

fn to_json(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize")
}

fn parse_bytes(bytes: &[u8], what: &str) -> Result<Option<Value>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice::<Value>(bytes)
        .map(|v| Some(v).filter(|v| !v.is_null()))
        .map_err(|e| format!("the handler server returned invalid JSON in `{what}`: {e}"))
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

impl<'a> Round<'a> {
    fn wake_at(&mut self, t: DateTime<Utc>) {
        self.wake = Some(self.wake.map_or(t, |w| w.min(t)));
    }

    /// Whether the (sub-)handler `id` is finished for this cause.
    pub fn finished(&self, id: &str) -> bool {
        self.skipped.contains(id) || self.records.get(id).is_some_and(ProgressRecord::finished)
    }

    /// Moves handler `h` (or its sub-handler `id`) forward by at most one attempt each.
    pub fn advance<'s>(
        &'s mut self,
        h: &'s Handler,
        id: String,
        parent: Option<String>,
        param: Option<Value>,
        old: Option<&'s Value>,
        new: Option<&'s Value>,
    ) -> BoxFuture<'s, ()> {
        Box::pin(async move {
            let purpose = self.reason.purpose();
            let prev = self.records.get(&id).cloned();
            if prev.as_ref().is_some_and(ProgressRecord::finished) {
                return;
            }
            if let Some(children) = prev.as_ref().and_then(|r| r.subrefs.clone()).filter(|c| !c.is_empty()) {
                for child in &children {
                    let child_param = self.records.get(child).and_then(|r| r.param.clone());
                    self.advance(h, child.clone(), Some(id.clone()), child_param, old, new).await;
                }
                self.settle_parent(&id, &children);
                return;
            }
            if let Some(until) = prev.as_ref().and_then(ProgressRecord::delayed_until).filter(|u| *u > self.now) {
                self.wake_at(until);
                return;
            }
            if let Some(message) = precheck(h, prev.as_ref(), self.now) {
                self.ctx.log.error(Some(&self.obj), &Verdict::Failed(message.clone()).log_line(&id));
                self.records.insert(id.clone(), record_limit_failure(prev.as_ref(), purpose, &message, self.now));
                self.calls.push(Call {
                    id,
                    verdict: Verdict::Failed(message.clone()),
                    result: None,
                    main_patch: None,
                    status_patch: None,
                    json_patch: None,
                    events: vec![failure_event(&Verdict::Failed(message.clone()).log_line(&h.id))],
                });
                return;
            }
            let mut answer = match self.call(h, &id, parent.as_deref(), prev.as_ref(), param.as_ref(), old, new).await {
                Ok(a) => a,
                Err(why) => {
                    let server = &self.ctx.servers[h.server].addr;
                    let line = format!("Handler '{id}' could not be called: handler server {server} is unreachable ({why}). Will retry.");
                    self.ctx.log.warn(Some(&self.obj), &line);
                    self.unreachable = true;
                    return;
                }
            };
            if answer.outcome == pb::Outcome::Success as i32 && !answer.owned.is_empty() {
                self.adopt_into(&mut answer).await;
            }
            let children: Vec<pb::SubHandler> = answer.subhandlers.clone();
            let (record, call) = self.digest(h, &id, prev.as_ref(), answer, children.is_empty());
            match record {
                Some(r) => self.records.insert(id.clone(), r),
                None => {
                    self.skipped.insert(id.clone());
                    self.records.remove(&id)
                }
            };
            let registers = call.verdict == Verdict::Succeeded && !children.is_empty();
            self.calls.push(call);
            if registers {
                let ids: Vec<String> = children.iter().map(|c| format!("{id}/{}", c.id)).collect();
                self.ctx.log.debug(Some(&self.obj), &format!("Handler '{id}' registered sub-handlers: {}.", ids.join(", ")));
                if let Some(parent) = self.records.get_mut(&id) {
                    parent.subrefs = Some(ids.clone());
                    parent.success = None;
                    parent.stopped = None;
                }
                for (child, full) in children.iter().zip(&ids) {
                    let param = serde_json::from_slice::<Value>(&child.param).ok();
                    let record = ProgressRecord { purpose: Some(purpose.into()), param, ..Default::default() };
                    self.records.entry(full.clone()).or_insert(record);
                }
                for full in &ids {
                    let p = self.records.get(full).and_then(|r| r.param.clone());
                    self.advance(h, full.clone(), Some(id.clone()), p, old, new).await;
                }
                self.settle_parent(&id, &ids);
            }
        })
    }

    /// A parent is finished when all its sub-handlers are: succeeded if all succeeded.
    fn settle_parent(&mut self, id: &str, children: &[String]) {
        if !children.iter().all(|c| self.finished(c)) {
            return;
        }
        let failed: Vec<&String> = children.iter().filter(|c| self.records.get(*c).is_some_and(|r| r.failure == Some(true))).collect();
        let now = format_time(self.now);
        let Some(parent) = self.records.get_mut(id) else { return };
        parent.stopped = Some(now);
        parent.delayed = None;
        if failed.is_empty() {
            parent.success = Some(true);
            self.ctx.log.info(Some(&self.obj), &Verdict::Succeeded.log_line(id));
        } else {
            let message = format!("sub-handler(s) failed: {}", failed.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "));
            parent.failure = Some(true);
            parent.message = Some(message.clone());
            self.ctx.log.error(Some(&self.obj), &Verdict::Failed(message).log_line(id));
        }
    }

    /// Calls one (sub-)handler once. `Err` when its server could not be reached.
    #[allow(clippy::too_many_arguments)]
    async fn call(
        &self,
        h: &Handler,
        id: &str,
        parent: Option<&str>,
        prev: Option<&ProgressRecord>,
        param: Option<&Value>,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<pb::HandleResponse, String> {
        let started = prev.and_then(ProgressRecord::started_at).unwrap_or(self.now);
        let runtime = (self.now - started).to_std().unwrap_or_default();
        let memo = self.ctx.memos.lock().get(self.uid).cloned().unwrap_or_default();
        let req = pb::HandleRequest {
            handler_id: id.to_string(),
            reason: pb_reason(self.reason) as i32,
            resource: Some(self.ctx.pb_resource()),
            object: to_json(self.body),
            old: old.map(to_json).unwrap_or_default(),
            new: new.map(to_json).unwrap_or_default(),
            diff: self
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
            retry: prev.and_then(|r| r.retries).unwrap_or(0),
            started: Some(bosun_proto::prost_types::Timestamp {
                seconds: started.timestamp(),
                nanos: started.timestamp_subsec_nanos() as i32,
            }),
            runtime: Some(bosun_proto::prost_types::Duration { seconds: runtime.as_secs() as i64, nanos: runtime.subsec_nanos() as i32 }),
            param: param.map(to_json).unwrap_or_default(),
            memo,
            event_type: String::new(),
            parent_id: parent.unwrap_or_default().to_string(),
            subhandler_id: parent.and_then(|p| id.strip_prefix(p)).map(|c| c.trim_start_matches('/').to_string()).unwrap_or_default(),
        };
        self.ctx.log.debug(Some(&self.obj), &format!("Handler '{id}' is invoked."));
        match self.ctx.servers[h.server].handle(req, h.call_timeout).await {
            Ok(a) => Ok(a),
            Err(CallFailure::Unreachable(why)) => Err(why),
            Err(CallFailure::Rejected(why)) => Ok(pb::HandleResponse {
                outcome: pb::Outcome::UnexpectedError as i32,
                message: format!("the handler server refused the call: {why}"),
                ..Default::default()
            }),
        }
    }

    /// Turns an answer into a progress record (`None`: skipped) and a call, logging its
    /// lines and verdict (`final_`: no sub-handlers follow, so success is final).
    fn digest(
        &self,
        h: &Handler,
        id: &str,
        prev: Option<&ProgressRecord>,
        answer: pb::HandleResponse,
        final_: bool,
    ) -> (Option<ProgressRecord>, Call) {
        let obj = &self.obj;
        self.ctx.log_lines(obj, &answer.logs);
        if !answer.memo.is_empty() {
            self.ctx.memos.lock().insert(self.uid.to_string(), answer.memo.clone());
        }
        let parsed = (|| -> Result<Parsed, String> {
            let result = parse_bytes(&answer.result, "result")?;
            let merge = parse_bytes(&answer.merge_patch, "merge_patch")?;
            if merge.as_ref().is_some_and(|m| !m.is_object()) {
                return Err("the handler server returned a `merge_patch` that is not a JSON object".into());
            }
            let jp = parse_bytes(&answer.json_patch, "json_patch")?;
            if let Some(p) = &jp {
                serde_json::from_value::<json_patch::Patch>(p.clone())
                    .map_err(|e| format!("the handler server returned an invalid `json_patch`: {e}"))?;
            }
            Ok((result, merge, jp))
        })();
        let outcome = pb::Outcome::try_from(answer.outcome).unwrap_or(pb::Outcome::UnexpectedError);
        let (attempt, result, merge, jp) = match parsed {
            Err(why) => (Attempt::Unexpected(why), None, None, None),
            Ok((result, merge, jp)) => {
                let attempt = match outcome {
                    pb::Outcome::Success => Attempt::Success(result.clone()),
                    pb::Outcome::TemporaryError => Attempt::Temporary {
                        message: answer.message.clone(),
                        delay: answer.delay_seconds.filter(|d| d.is_finite() && *d >= 0.0).map(Duration::from_secs_f64),
                    },
                    pb::Outcome::PermanentError => Attempt::Permanent(answer.message.clone()),
                    pb::Outcome::Skipped => Attempt::Skipped,
                    pb::Outcome::UnexpectedError => Attempt::Unexpected(answer.message.clone()),
                };
                (attempt, result, merge, jp)
            }
        };
        let (record, verdict) = record_attempt(h, prev, self.reason.purpose(), &attempt, self.now);
        let line = verdict.log_line(id);
        let mut events = answer.events.clone();
        match &verdict {
            Verdict::Succeeded if final_ => self.ctx.log.info(Some(obj), &line),
            // A parent's success is logged once its sub-handlers are done.
            Verdict::Succeeded => {}
            Verdict::Skipped => self.ctx.log.debug(Some(obj), &line),
            Verdict::Retry { .. } | Verdict::Ignored(_) => self.ctx.log.warn(Some(obj), &line),
            Verdict::Failed(_) => {
                self.ctx.log.error(Some(obj), &line);
                events.push(failure_event(&line));
            }
        }
        // Patches of failed attempts still apply (as in Kopf); skipped handlers change nothing.
        let (status_patch, main_patch) = match (&verdict, merge) {
            (Verdict::Skipped, _) | (_, None) => (None, None),
            (_, Some(m)) => {
                let (mut main, mut status) = (serde_json::json!({}), serde_json::json!({}));
                self.ctx.add_patch(&m, &mut main, &mut status);
                let some = |v: Value| Some(v).filter(|v| v.as_object().is_some_and(|o| !o.is_empty()));
                (some(status), some(main))
            }
        };
        let call = Call { id: id.to_string(), verdict, result, main_patch, status_patch, json_patch: jp, events };
        (record, call)
    }

    /// Creates and adopts a successful answer's owned objects; their UIDs join the result
    /// as `children` (Kopf's example 02 shape). A failure turns the answer into an
    /// unexpected error of the handler, so its errors mode decides what follows.
    async fn adopt_into(&self, answer: &mut pb::HandleResponse) {
        match self.ctx.adopt(self.body, &answer.owned).await {
            Ok(uids) => {
                let mut result = parse_bytes(&answer.result, "result").ok().flatten().unwrap_or_else(|| serde_json::json!({}));
                if let Some(map) = result.as_object_mut() {
                    map.insert("children".into(), serde_json::json!(uids));
                    answer.result = serde_json::to_vec(&result).expect("JSON values serialize");
                }
                self.ctx.log.info(Some(&self.obj), &format!("Adopted and created {} owned object(s).", uids.len()));
            }
            Err(why) => {
                answer.outcome = pb::Outcome::UnexpectedError as i32;
                answer.message = format!("owned objects could not be created: {why}");
            }
        }
    }

    /// Records when retries are due (called after each digest).
    pub fn note_retries(&mut self) {
        let untils: Vec<DateTime<Utc>> =
            self.calls.iter().filter_map(|c| if let Verdict::Retry { until, .. } = &c.verdict { Some(*until) } else { None }).collect();
        for u in untils {
            self.wake_at(u);
        }
    }

    /// Marks the calls that patched as failed because the API server rejected the write.
    pub fn reject_patches(&mut self, message: &str) -> bool {
        let purpose = self.reason.purpose();
        let why = format!("its patch was rejected by the API server: {message}");
        let mut any = false;
        for c in self.calls.iter_mut().filter(|c| c.patches()) {
            any = true;
            let line = Verdict::Failed(why.clone()).log_line(&c.id);
            self.ctx.log.error(Some(&self.obj), &line);
            let prev = self.records.get(&c.id).cloned();
            self.records.insert(c.id.clone(), record_limit_failure(prev.as_ref(), purpose, &why, self.now));
            c.verdict = Verdict::Failed(why.clone());
            c.result = None;
            c.main_patch = None;
            c.status_patch = None;
            c.json_patch = None;
            c.events.push(failure_event(&line));
        }
        any
    }
}

/// The Warning event posted for a permanent failure.
pub fn failure_event(line: &str) -> pb::Event {
    pb::Event { r#type: "Warning".into(), reason: "Error".into(), message: line.to_string(), regarding: None }
}
