//! One handling cycle of one object: detect the cause, call the due handlers, and write
//! their patches, results and the progress in as few API requests as possible (one when
//! the state lives in status; one more when the finalizer changes).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::patches::{compose, split_status};
use crate::cluster::{self, Cluster, ResolvedResource, content, events};
use crate::engines::dispatch::{CallFailure, Server};
use crate::logs::{Logger, ObjectRef};
use crate::state::causes::{Observation, Reason, detect};
use crate::state::diff::{DiffOp, diff};
use crate::state::essence::{EssenceRules, decode_diffbase, encode_diffbase, essence};
use crate::state::outcomes::{Attempt, Verdict, precheck, record_attempt, record_limit_failure};
use crate::state::progress::ProgressRecord;
use crate::state::registry::Handler;
use crate::state::storage::{ObjectState, Storage, is_empty_patch};

/// Everything the cycles of one resource share.
pub struct ResourceContext {
    /// The resource.
    pub resource: ResolvedResource,
    /// Its handlers, in registration order.
    pub handlers: Vec<Arc<Handler>>,
    /// Where state is kept.
    pub storage: Storage,
    /// What the essence keeps.
    pub rules: EssenceRules,
    /// The API server.
    pub cluster: Cluster,
    /// The handler servers, by index.
    pub servers: Arc<Vec<Server>>,
    /// The log.
    pub log: Logger,
    /// UIDs seen since the controller started (for resume).
    pub seen: Mutex<HashSet<String>>,
    /// Memos by UID (not persisted).
    pub memos: Mutex<HashMap<String, Vec<u8>>>,
}

/// What the worker should do after a cycle.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Nothing until the next event.
    Idle,
    /// Run again at this time with the newest known body (delays, retries).
    WakeAt(DateTime<Utc>),
    /// The object is gone: the worker may end.
    Gone,
}

/// The end of a cycle: what comes next and the newest body the cycle knows of.
#[derive(Debug)]
pub struct CycleEnd {
    /// What the worker does next.
    pub next: Next,
    /// The body returned by the last write, if any (newer than the event's).
    pub written: Option<Value>,
}

/// A handler answer's result, merge patch and JSON patch, parsed.
type Parsed = (Option<Value>, Option<Value>, Option<Value>);

/// What one handler's call produced in this cycle.
struct Call {
    id: String,
    record: Option<ProgressRecord>,
    verdict: Verdict,
    result: Option<Value>,
    main_patch: Option<Value>,
    status_patch: Option<Value>,
    json_patch: Option<Value>,
    events: Vec<pb::Event>,
}

fn meta_str<'a>(body: &'a Value, key: &str) -> &'a str {
    body.get("metadata").and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or("")
}

/// The object's `[namespace/name]`.
pub fn object_ref(body: &Value) -> ObjectRef {
    ObjectRef { namespace: meta_str(body, "namespace").to_string(), name: meta_str(body, "name").to_string() }
}

fn to_json(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize")
}

fn timestamp(t: DateTime<Utc>) -> bosun_proto::prost_types::Timestamp {
    bosun_proto::prost_types::Timestamp { seconds: t.timestamp(), nanos: t.timestamp_subsec_nanos() as i32 }
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

/// Parses optional JSON bytes from a handler; `Err` names the field for the failure message.
fn parse_bytes(bytes: &[u8], what: &str) -> Result<Option<Value>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice::<Value>(bytes)
        .map(|v| Some(v).filter(|v| !v.is_null()))
        .map_err(|e| format!("the handler server returned invalid JSON in `{what}`: {e}"))
}

impl ResourceContext {
    fn ids(&self) -> Vec<&str> {
        self.handlers.iter().map(|h| h.id.as_str()).collect()
    }

    fn pb_resource(&self) -> pb::Resource {
        let r = &self.resource;
        pb::Resource {
            group: r.group.clone(),
            version: r.version.clone(),
            plural: r.plural.clone(),
            kind: r.kind.clone(),
            namespaced: r.namespaced,
        }
    }

    /// Runs one cycle for `body` (`deleted`: the watch said DELETED).
    pub async fn process(&self, body: &Value, deleted: bool) -> CycleEnd {
        let obj = object_ref(body);
        let uid = meta_str(body, "uid").to_string();
        let relevant: Vec<&Arc<Handler>> = self.handlers.iter().filter(|h| h.matches_object(body)).collect();
        let has_finalizer = self.storage.has_finalizer(body);
        if deleted {
            self.seen.lock().remove(&uid);
            self.memos.lock().remove(&uid);
            return CycleEnd { next: Next::Gone, written: None };
        }
        if relevant.is_empty() && !has_finalizer {
            return CycleEnd { next: Next::Idle, written: None };
        }
        let state = self.storage.read(body, self.ids());
        let new_essence = essence(body, &self.rules);
        let old_essence = state.diffbase.as_deref().and_then(decode_diffbase);
        let first_sight = self.seen.lock().insert(uid.clone());
        let deleting = body.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null());
        let mut reason = detect(Observation {
            deleted_event: false,
            deletion_requested: deleting,
            has_finalizer,
            has_diffbase: old_essence.is_some(),
            changed: old_essence.as_ref() != Some(&new_essence),
            first_sight,
        });
        let resuming = state.progress.values().any(|r| r.purpose.as_deref() == Some("resume") && !r.finished());
        if reason == Reason::Noop && resuming {
            reason = Reason::Resume;
        }
        if reason == Reason::Free {
            return CycleEnd { next: Next::Idle, written: None };
        }
        let diff_items = if reason == Reason::Update { diff(old_essence.as_ref(), Some(&new_essence)) } else { Vec::new() };
        let old_for_handlers = if reason == Reason::Update { old_essence.as_ref() } else { None };
        let due: Vec<(&Arc<Handler>, Option<Value>, Option<Value>)> = relevant
            .iter()
            .filter_map(|h| h.due(reason, old_for_handlers, &new_essence, &diff_items).map(|(o, n)| (*h, o, n)))
            .collect();

        // Call every due handler that is neither finished nor delayed.
        let now = Utc::now();
        let purpose = reason.purpose();
        let mut calls: Vec<Call> = Vec::new();
        let mut wake: Option<DateTime<Utc>> = None;
        let mut unreachable = false;
        for (h, old, new) in &due {
            let prev = state.progress.get(&h.id).filter(|r| r.purpose.as_deref() == Some(purpose));
            if prev.is_some_and(ProgressRecord::finished) {
                continue;
            }
            if let Some(until) = prev.and_then(ProgressRecord::delayed_until).filter(|u| *u > now) {
                wake = Some(wake.map_or(until, |w| w.min(until)));
                continue;
            }
            if let Some(message) = precheck(h, prev, now) {
                self.log.error(Some(&obj), &Verdict::Failed(message.clone()).log_line(&h.id));
                calls.push(Call {
                    id: h.id.clone(),
                    record: Some(record_limit_failure(prev, purpose, &message, now)),
                    verdict: Verdict::Failed(message),
                    result: None,
                    main_patch: None,
                    status_patch: None,
                    json_patch: None,
                    events: Vec::new(),
                });
                continue;
            }
            match self.call(h, reason, body, &uid, prev, old.as_ref(), new.as_ref(), &diff_items, now).await {
                Ok(call) => {
                    if let Verdict::Retry { until, .. } = &call.verdict {
                        wake = Some(wake.map_or(*until, |w| w.min(*until)));
                    }
                    calls.push(call);
                }
                Err(why) => {
                    let server = &self.servers[h.server].addr;
                    self.log.warn(
                        Some(&obj),
                        &format!("Handler '{}' could not be called: handler server {server} is unreachable ({why}). Will retry.", h.id),
                    );
                    unreachable = true;
                }
            }
        }

        // Decide the state and the finalizer, write, and repeat without the patches of
        // handlers whose patch the API server rejects.
        loop {
            let mut records: BTreeMap<String, ProgressRecord> = BTreeMap::new();
            for (h, _, _) in &due {
                if let Some(r) = state.progress.get(&h.id).filter(|r| r.purpose.as_deref() == Some(purpose)) {
                    records.insert(h.id.clone(), r.clone());
                }
            }
            for c in &calls {
                match &c.record {
                    Some(r) => records.insert(c.id.clone(), r.clone()),
                    None => records.remove(&c.id),
                };
            }
            let skipped: HashSet<&str> =
                calls.iter().filter(|c| c.verdict == Verdict::Skipped).map(|c| c.id.as_str()).collect();
            let finished = due
                .iter()
                .all(|(h, _, _)| skipped.contains(h.id.as_str()) || records.get(&h.id).is_some_and(ProgressRecord::finished));
            let done = finished && !unreachable;
            let mut desired = ObjectState { diffbase: state.diffbase.clone(), progress: records.clone() };
            if done {
                desired.progress.clear();
                if reason.stores_diffbase() {
                    desired.diffbase = Some(encode_diffbase(&new_essence));
                }
                if !due.is_empty() {
                    let ok = records.values().filter(|r| r.success == Some(true)).count();
                    let failed = records.values().filter(|r| r.failure == Some(true)).count();
                    self.log.info(Some(&obj), &format!("{} is processed: {ok} succeeded; {failed} failed.", reason.title()));
                }
            }
            let finalizer_wanted = if reason == Reason::Delete {
                !done
            } else {
                relevant.iter().any(|h| h.requires_finalizer())
            };

            let mut main = json!({});
            let mut status = json!({});
            let status_target_is_main = !self.resource.has_status;
            for c in &calls {
                if let Some(p) = &c.main_patch {
                    compose(&mut main, p);
                }
                if let Some(p) = &c.status_patch {
                    compose(if status_target_is_main { &mut main } else { &mut status }, p);
                }
                if let (Some(result), Verdict::Succeeded | Verdict::Ignored(_)) = (&c.result, &c.verdict) {
                    let p = json!({"status": {c.id.clone(): result}});
                    compose(if status_target_is_main { &mut main } else { &mut status }, &p);
                }
            }
            // The state is not worth writing on an object about to go.
            let goes_now = reason == Reason::Delete && done;
            if !goes_now {
                let ids = self.ids();
                if status_target_is_main {
                    let mut tmp = json!({});
                    self.storage.patch(body, &desired, &ids, &mut main, &mut tmp);
                    compose(&mut main, &tmp);
                } else {
                    self.storage.patch(body, &desired, &ids, &mut main, &mut status);
                }
            }
            let finalizers_change = finalizer_wanted != has_finalizer;
            if finalizers_change {
                if finalizer_wanted {
                    self.log.info(Some(&obj), "Adding the finalizer, thus preventing the actual deletion.");
                } else if reason == Reason::Delete {
                    self.log.debug(Some(&obj), "Removing the finalizer, as the deletion is processed.");
                } else {
                    self.log.info(Some(&obj), "Removing the finalizer, as there are no handlers requiring it.");
                }
            }
            let json_patches: Vec<(&str, &Value)> =
                calls.iter().filter_map(|c| c.json_patch.as_ref().map(|p| (c.id.as_str(), p))).collect();
            match self.write(body, main, status, finalizers_change.then_some(finalizer_wanted), &json_patches).await {
                Ok(written) => {
                    self.post_events(body, &calls).await;
                    let next = if unreachable {
                        let retry = now + chrono::Duration::seconds(5);
                        Next::WakeAt(wake.map_or(retry, |w| w.min(retry)))
                    } else if done {
                        Next::Idle
                    } else {
                        wake.map_or(Next::Idle, Next::WakeAt)
                    };
                    return CycleEnd { next, written };
                }
                Err(WriteError::Gone) => return CycleEnd { next: Next::Gone, written: None },
                Err(WriteError::Conflict) => {
                    self.log.debug(Some(&obj), "The object changed meanwhile; waiting for its newer version.");
                    return CycleEnd { next: Next::WakeAt(now + chrono::Duration::seconds(1)), written: None };
                }
                Err(WriteError::Rejected(message)) => {
                    let guilty: Vec<String> = calls
                        .iter()
                        .filter(|c| c.main_patch.is_some() || c.status_patch.is_some() || c.json_patch.is_some())
                        .map(|c| c.id.clone())
                        .collect();
                    if guilty.is_empty() {
                        self.log.error(Some(&obj), &format!("Patching failed: {message}. Will retry."));
                        return CycleEnd { next: Next::WakeAt(now + chrono::Duration::seconds(10)), written: None };
                    }
                    for c in calls.iter_mut().filter(|c| guilty.contains(&c.id)) {
                        let why = format!("its patch was rejected by the API server: {message}");
                        self.log.error(Some(&obj), &Verdict::Failed(why.clone()).log_line(&c.id));
                        c.record = Some(record_limit_failure(c.record.as_ref(), purpose, &why, now));
                        c.verdict = Verdict::Failed(why.clone());
                        c.result = None;
                        c.main_patch = None;
                        c.status_patch = None;
                        c.json_patch = None;
                        c.events.push(pb::Event {
                            r#type: "Warning".into(),
                            reason: "Error".into(),
                            message: format!("Handler '{}' failed permanently: {why}", c.id),
                            regarding: None,
                        });
                    }
                }
                Err(WriteError::Unavailable(message)) => {
                    self.log.error(Some(&obj), &format!("Patching failed: {message}. Will retry."));
                    return CycleEnd { next: Next::WakeAt(now + chrono::Duration::seconds(10)), written: None };
                }
            }
        }
    }

    /// Calls one handler once. `Err` when the server could not be reached.
    #[allow(clippy::too_many_arguments)]
    async fn call(
        &self,
        h: &Handler,
        reason: Reason,
        body: &Value,
        uid: &str,
        prev: Option<&ProgressRecord>,
        old: Option<&Value>,
        new: Option<&Value>,
        diff_items: &[crate::state::diff::DiffItem],
        now: DateTime<Utc>,
    ) -> Result<Call, String> {
        let obj = object_ref(body);
        let started = prev.and_then(ProgressRecord::started_at).unwrap_or(now);
        let runtime = (now - started).to_std().unwrap_or_default();
        let memo = self.memos.lock().get(uid).cloned().unwrap_or_default();
        let req = pb::HandleRequest {
            handler_id: h.id.clone(),
            reason: pb_reason(reason) as i32,
            resource: Some(self.pb_resource()),
            object: to_json(body),
            old: old.map(to_json).unwrap_or_default(),
            new: new.map(to_json).unwrap_or_default(),
            diff: diff_items
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
            started: Some(timestamp(started)),
            runtime: Some(bosun_proto::prost_types::Duration { seconds: runtime.as_secs() as i64, nanos: runtime.subsec_nanos() as i32 }),
            param: Vec::new(),
            memo,
            event_type: String::new(),
        };
        self.log.debug(Some(&obj), &format!("Handler '{}' is invoked.", h.id));
        let answer = match self.servers[h.server].handle(req, h.call_timeout).await {
            Ok(a) => a,
            Err(CallFailure::Unreachable(why)) => return Err(why),
            Err(CallFailure::Rejected(why)) => pb::HandleResponse {
                outcome: pb::Outcome::UnexpectedError as i32,
                message: format!("the handler server refused the call: {why}"),
                ..Default::default()
            },
        };
        Ok(self.digest(h, prev, reason, &obj, uid, answer, now))
    }

    /// Turns a handler's answer into a call record, logging its lines and verdict.
    #[allow(clippy::too_many_arguments)]
    fn digest(
        &self,
        h: &Handler,
        prev: Option<&ProgressRecord>,
        reason: Reason,
        obj: &ObjectRef,
        uid: &str,
        answer: pb::HandleResponse,
        now: DateTime<Utc>,
    ) -> Call {
        for line in &answer.logs {
            let text = &line.message;
            match pb::log_line::Level::try_from(line.level).unwrap_or_default() {
                pb::log_line::Level::Debug => self.log.debug(Some(obj), text),
                pb::log_line::Level::Info => self.log.info(Some(obj), text),
                pb::log_line::Level::Warning => self.log.warn(Some(obj), text),
                pb::log_line::Level::Error => self.log.error(Some(obj), text),
            }
        }
        if !answer.memo.is_empty() {
            self.memos.lock().insert(uid.to_string(), answer.memo.clone());
        }
        if !answer.subhandlers.is_empty() || !answer.owned.is_empty() {
            self.log.warn(
                Some(obj),
                &format!("Handler '{}' returned sub-handlers or owned objects, which this controller does not run yet; ignored.", h.id),
            );
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
        let (record, verdict) = record_attempt(h, prev, reason.purpose(), &attempt, now);
        let line = verdict.log_line(&h.id);
        let mut events = answer.events.clone();
        match &verdict {
            Verdict::Succeeded => self.log.info(Some(obj), &line),
            Verdict::Skipped => self.log.debug(Some(obj), &line),
            Verdict::Retry { .. } | Verdict::Ignored(_) => self.log.warn(Some(obj), &line),
            Verdict::Failed(_) => {
                self.log.error(Some(obj), &line);
                events.push(pb::Event { r#type: "Warning".into(), reason: "Error".into(), message: line.clone(), regarding: None });
            }
        }
        // Patches of failed attempts still apply (as in Kopf); skipped handlers change nothing.
        let (status_patch, main_patch) = match (&verdict, merge) {
            (Verdict::Skipped, _) | (_, None) => (None, None),
            (_, Some(m)) => {
                if self.resource.has_status { split_status(&m) } else { (None, Some(m)) }
            }
        };
        Call {
            id: h.id.clone(),
            record,
            verdict,
            result,
            main_patch,
            status_patch,
            json_patch: jp,
            events,
        }
    }

    async fn post_events(&self, body: &Value, calls: &[Call]) {
        let regarding = events::Regarding::of(body);
        for e in calls.iter().flat_map(|c| c.events.iter()) {
            let target = match &e.regarding {
                Some(r) => events::Regarding {
                    api_version: r.api_version.clone(),
                    kind: r.kind.clone(),
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                    uid: r.uid.clone(),
                },
                None => regarding.clone(),
            };
            if let Err(err) = events::post(&self.cluster, &target, &e.r#type, &e.reason, &e.message).await {
                self.log.warn(Some(&object_ref(body)), &format!("Failed to post an event: {err}"));
            }
        }
    }

    /// Writes the main patch (with the finalizer change, guarded by the resourceVersion),
    /// then the status patch, then handlers' JSON patches. Returns the last written body.
    async fn write(
        &self,
        body: &Value,
        main: Value,
        status: Value,
        finalizer: Option<bool>,
        json_patches: &[(&str, &Value)],
    ) -> Result<Option<Value>, WriteError> {
        let ns = meta_str(body, "namespace");
        let name = meta_str(body, "name");
        let path = self.resource.object_path(ns, name);
        let mut written = None;
        let mut current = body.clone();
        for attempt in 0..3 {
            let mut main_now = main.clone();
            if let Some(want) = finalizer {
                let mut list: Vec<Value> =
                    current.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
                list.retain(|f| f.as_str() != Some(self.storage.finalizer.as_str()));
                if want {
                    list.push(Value::String(self.storage.finalizer.clone()));
                }
                compose(&mut main_now, &json!({"metadata": {"finalizers": list, "resourceVersion": meta_str(&current, "resourceVersion")}}));
            }
            if is_empty_patch(&main_now) {
                break;
            }
            match self.cluster.patch(&path, content::MERGE, &main_now).await {
                Ok(v) => {
                    written = Some(v);
                    break;
                }
                Err(e) if e.code() == Some(409) && finalizer.is_some() && attempt < 2 => {
                    current = self.cluster.get(&path).await.map_err(WriteError::from)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        if !is_empty_patch(&status) {
            let status_path = format!("{path}/status");
            written = Some(self.cluster.patch(&status_path, content::MERGE, &status).await?);
        }
        for (_, p) in json_patches {
            written = Some(self.cluster.patch(&path, content::JSON_PATCH, p).await?);
        }
        Ok(written)
    }
}

/// Why a write did not happen.
#[derive(Debug)]
enum WriteError {
    /// 404: the object is gone.
    Gone,
    /// 409: it changed meanwhile.
    Conflict,
    /// 4xx: the patch is unacceptable.
    Rejected(String),
    /// 5xx/network after retries.
    Unavailable(String),
}

impl From<cluster::Error> for WriteError {
    fn from(e: cluster::Error) -> WriteError {
        match e.code() {
            Some(404) => WriteError::Gone,
            Some(409) => WriteError::Conflict,
            Some(c) if (400..500).contains(&c) && c != 429 => WriteError::Rejected(e.to_string()),
            _ => WriteError::Unavailable(e.to_string()),
        }
    }
}
