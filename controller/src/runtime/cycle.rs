//! One handling cycle of one object: detect the cause, call the due handlers (`calls`), and
//! write their patches, results and the progress (`writes`) in as few API requests as
//! possible (one when the state lives in status; one more when the finalizer changes).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bosun_proto::v1 as pb;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::calls::Round;
use super::patches::compose;
use super::writes::WriteError;
use crate::cluster::{Cluster, ResolvedResource, events};
use crate::engines::dispatch::Server;
use crate::logs::{Logger, ObjectRef};
use crate::state::causes::{Observation, Reason, detect};
use crate::state::diff::diff;
use crate::state::essence::{EssenceRules, decode_diffbase, encode_diffbase, essence};
use crate::state::outcomes::Verdict;
use crate::state::progress::ProgressRecord;
use crate::state::registry::Handler;
use crate::state::storage::{ObjectState, Storage};

/// Everything the cycles of one resource share.
pub struct ResourceContext {
    /// The resource.
    pub resource: ResolvedResource,
    /// Its changing handlers (create, update, delete, resume, field), in registration order.
    pub handlers: Vec<Arc<Handler>>,
    /// Its raw-event spies.
    pub spies: Vec<Arc<Handler>>,
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
    /// A label selector is pushed to the API server: DELETED may mean "stopped matching".
    pub selector_pushed: bool,
    /// UIDs seen since the controller started (for resume).
    pub seen: Mutex<HashSet<String>>,
    /// Memos by UID (not persisted).
    pub memos: Mutex<HashMap<String, Vec<u8>>>,
    /// The running timers.
    pub timers: super::timers::Timers,
    /// Where background tasks (timers) are tracked.
    pub tasks: tokio_util::task::TaskTracker,
    /// Flips to true when the controller stops.
    pub stop: tokio::sync::watch::Receiver<bool>,
}

/// What the worker should do after a cycle.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Nothing until the next event.
    Idle,
    /// Run again at this time with the newest known body (delays, retries).
    WakeAt(DateTime<Utc>),
    /// Something outside the handlers failed (a handler server unreachable, the API server
    /// unavailable): run again after the object's throttling delay, or at this time if
    /// earlier (a handler's own delay).
    Throttled(Option<DateTime<Utc>>),
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

/// A string field of the object's metadata ("" when absent).
pub fn meta_str<'a>(body: &'a Value, key: &str) -> &'a str {
    body.get("metadata").and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or("")
}

/// The object's `[namespace/name]`.
pub fn object_ref(body: &Value) -> ObjectRef {
    ObjectRef { namespace: meta_str(body, "namespace").to_string(), name: meta_str(body, "name").to_string() }
}

/// The annotation that keeps a handler's result on resources whose status cannot.
pub fn result_annotation(prefix: &str, id: &str) -> String {
    crate::state::progress::annotation_key(prefix, &format!("{id}.result"))
}

/// Every (sub-)handler id with state on the object: the handlers' own and, recursively, the
/// sub-handlers their records name.
fn all_ids(top: &[&str], progress: &BTreeMap<String, ProgressRecord>) -> Vec<String> {
    let mut out: Vec<String> = top.iter().map(|s| s.to_string()).collect();
    let mut i = 0;
    while i < out.len() {
        if let Some(subs) = progress.get(&out[i]).and_then(|r| r.subrefs.clone()) {
            for s in subs {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        i += 1;
    }
    out
}

impl ResourceContext {
    fn ids(&self) -> Vec<&str> {
        self.handlers.iter().map(|h| h.id.as_str()).collect()
    }

    /// The resource as the contract describes it.
    pub fn pb_resource(&self) -> pb::Resource {
        let r = &self.resource;
        pb::Resource {
            group: r.group.clone(),
            version: r.version.clone(),
            plural: r.plural.clone(),
            kind: r.kind.clone(),
            namespaced: r.namespaced,
        }
    }

    /// Reads the state of every handler and sub-handler.
    fn read_state(&self, body: &Value) -> (ObjectState, Vec<String>) {
        let top = self.ids();
        let mut ids: Vec<String> = top.iter().map(|s| s.to_string()).collect();
        // Each read may reveal sub-handlers (their ids are in their parents' records): read
        // again with them until no new id turns up.
        loop {
            let state = self.storage.read(body, ids.iter().map(String::as_str));
            let next = all_ids(&top, &state.progress);
            if next.len() == ids.len() {
                return (state, ids);
            }
            ids = next;
        }
    }

    /// Runs one cycle for `body` (`deleted`: the watch said DELETED).
    pub async fn process(self: &Arc<Self>, body: &Value, deleted: bool) -> CycleEnd {
        let obj = object_ref(body);
        let uid = meta_str(body, "uid").to_string();
        let key = format!("{}/{}", obj.namespace, obj.name);
        if deleted {
            self.timers.stop(&key);
            // Under a pushed-down label selector, an object that merely stopped matching is
            // reported DELETED; if it still carries our finalizer, release it, or its real
            // deletion would wait for a controller that no longer sees it.
            if self.selector_pushed && self.storage.has_finalizer(body) {
                let path = self.resource.object_path(meta_str(body, "namespace"), meta_str(body, "name"));
                if let Ok(current) = self.cluster.get(&path).await
                    && meta_str(&current, "uid") == uid
                {
                    return Box::pin(self.process(&current, false)).await;
                }
            }
            self.seen.lock().remove(&uid);
            self.memos.lock().remove(&uid);
            return CycleEnd { next: Next::Gone, written: None };
        }
        let relevant: Vec<&Arc<Handler>> = self.handlers.iter().filter(|h| h.matches_object(body)).collect();
        let has_finalizer = self.storage.has_finalizer(body);
        let deleting = body.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null());
        let mut computed_essence = None;
        let background = |k: pb::HandlerKind| matches!(k, pb::HandlerKind::Timer | pb::HandlerKind::Daemon);
        if self.handlers.iter().any(|h| background(h.kind)) {
            let timers: Vec<Arc<Handler>> = relevant.iter().filter(|h| background(h.kind) && !deleting).map(|h| (*h).clone()).collect();
            let e = essence(body, &self.rules);
            self.timers.sync(self, &key, body, &e, &timers);
            computed_essence = Some(e);
        }
        if relevant.is_empty() && !has_finalizer {
            return CycleEnd { next: Next::Idle, written: None };
        }
        let (state, mut ids) = self.read_state(body);
        let new_essence = computed_essence.unwrap_or_else(|| essence(body, &self.rules));
        let old_essence = state.diffbase.as_deref().and_then(decode_diffbase);
        let first_sight = self.seen.lock().insert(uid.clone());
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
        let due: Vec<(&Arc<Handler>, Option<Value>, Option<Value>)> =
            relevant.iter().filter_map(|h| h.due(reason, old_for_handlers, &new_essence, &diff_items).map(|(o, n)| (*h, o, n))).collect();

        // Call every due handler (and sub-handler) that is neither finished nor delayed.
        let purpose = reason.purpose();
        let now = Utc::now();
        let mut round = Round {
            ctx: self,
            reason,
            body,
            uid: &uid,
            obj: obj.clone(),
            diff: &diff_items,
            now,
            // Records of an older cause are superseded: they are dropped (and purged below).
            records: state
                .progress
                .iter()
                .filter(|(_, r)| r.purpose.as_deref() == Some(purpose))
                .map(|(k, r)| (k.clone(), r.clone()))
                .collect(),
            calls: Vec::new(),
            skipped: HashSet::new(),
            wake: None,
            unreachable: false,
        };
        for (h, old, new) in &due {
            round.advance(h, h.id.clone(), None, None, old.as_ref(), new.as_ref()).await;
        }
        round.note_retries();
        for id in round.records.keys() {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();

        // Decide the state and the finalizer, write, and repeat without the patches of
        // handlers whose patch the API server rejects.
        loop {
            let mut notices: Vec<pb::Event> = Vec::new();
            let done = due.iter().all(|(h, _, _)| round.finished(&h.id)) && !round.unreachable;
            let mut desired = ObjectState { diffbase: state.diffbase.clone(), progress: round.records.clone() };
            if done {
                desired.progress.clear();
                if reason.stores_diffbase() {
                    let text = encode_diffbase(&new_essence);
                    match self.storage.diffbase_fits(body, &text) {
                        Ok(()) => desired.diffbase = Some(text),
                        Err(total) => {
                            // Keep the progress (the handlers stay done, nothing re-runs) and say why.
                            desired.progress = round.records.clone();
                            let line = format!(
                                "The diffbase does not fit in the annotations ({total} bytes with the others; the limit is {} bytes), so it is not stored. \
                                 Keep the state in status (`--storage auto` with a CRD whose status keeps unknown fields), or leave large fields out with ignored_fields.",
                                crate::state::storage::ANNOTATIONS_LIMIT
                            );
                            self.log.error(Some(&obj), &line);
                            notices.push(super::calls::failure_event(&line));
                        }
                    }
                }
                if !due.is_empty() {
                    let top: Vec<&ProgressRecord> = due.iter().filter_map(|(h, _, _)| round.records.get(&h.id)).collect();
                    let ok = top.iter().filter(|r| r.success == Some(true)).count();
                    let failed = top.iter().filter(|r| r.failure == Some(true)).count();
                    self.log.info(Some(&obj), &format!("{} is processed: {ok} succeeded; {failed} failed.", reason.title()));
                }
            }
            let finalizer_wanted = if reason == Reason::Delete { !done } else { relevant.iter().any(|h| h.requires_finalizer()) };

            let mut main = json!({});
            let mut status = json!({});
            let status_in_main = !self.resource.has_status;
            for c in &round.calls {
                if let Some(p) = &c.main_patch {
                    compose(&mut main, p);
                }
                if let Some(p) = &c.status_patch {
                    compose(if status_in_main { &mut main } else { &mut status }, p);
                }
                if let (Some(result), Verdict::Succeeded | Verdict::Ignored(_)) = (&c.result, &c.verdict) {
                    self.add_result(&c.id, result, &mut main, &mut status);
                }
            }
            // The state is not worth writing on an object about to go.
            if !(reason == Reason::Delete && done) {
                if status_in_main {
                    let mut tmp = json!({});
                    self.storage.patch(body, &desired, &id_refs, &mut main, &mut tmp);
                    compose(&mut main, &tmp);
                } else {
                    self.storage.patch(body, &desired, &id_refs, &mut main, &mut status);
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
                round.calls.iter().filter_map(|c| c.json_patch.as_ref().map(|p| (c.id.as_str(), p))).collect();
            let throttled = CycleEnd { next: Next::Throttled(None), written: None };
            match self.write(body, main, status, finalizers_change.then_some(finalizer_wanted), &json_patches).await {
                Ok(written) => {
                    self.post_events(body, round.calls.iter().flat_map(|c| c.events.iter()).chain(notices.iter())).await;
                    let next = if round.unreachable {
                        Next::Throttled(round.wake)
                    } else if done {
                        Next::Idle
                    } else {
                        round.wake.map_or(Next::Idle, Next::WakeAt)
                    };
                    return CycleEnd { next, written };
                }
                Err(WriteError::Gone) => return CycleEnd { next: Next::Gone, written: None },
                Err(WriteError::Conflict) => {
                    self.log.debug(Some(&obj), "The object changed meanwhile; waiting for its newer version.");
                    return CycleEnd { next: Next::WakeAt(now + chrono::Duration::seconds(1)), written: None };
                }
                Err(WriteError::Rejected(message)) => {
                    if !round.reject_patches(&message) {
                        self.log.error(Some(&obj), &format!("Patching failed: {message}. Will retry."));
                        return throttled;
                    }
                }
                Err(WriteError::Unavailable(message)) => {
                    self.log.error(Some(&obj), &format!("Patching failed: {message}. Will retry."));
                    return throttled;
                }
            }
        }
    }

    /// Adds a handler's merge patch to the writes: its `status` part goes to the status write
    /// where the resource has a status subresource, the rest to the main write.
    pub fn add_patch(&self, patch: &Value, main: &mut Value, status: &mut Value) {
        if !self.resource.has_status {
            return compose(main, patch);
        }
        let (st, rest) = super::patches::split_status(patch);
        if let Some(p) = rest {
            compose(main, &p);
        }
        if let Some(p) = st {
            compose(status, &p);
        }
    }

    /// Adds a handler's result to the writes: `status.<id>` where the status keeps unknown
    /// fields, else an annotation (the status would prune it).
    pub fn add_result(&self, id: &str, result: &Value, main: &mut Value, status: &mut Value) {
        if self.resource.status_keeps_unknown {
            let p = json!({"status": {id: result}});
            compose(if self.resource.has_status { status } else { main }, &p);
        } else {
            let text = serde_json::to_string(result).expect("JSON values serialize");
            compose(main, &json!({"metadata": {"annotations": {result_annotation(&self.storage.prefix, id): text}}}));
        }
    }

    /// Writes a handler's log lines with the object's prefix.
    pub fn log_lines(&self, obj: &ObjectRef, lines: &[pb::LogLine]) {
        for line in lines {
            let text = &line.message;
            match pb::log_line::Level::try_from(line.level).unwrap_or_default() {
                pb::log_line::Level::Debug => self.log.debug(Some(obj), text),
                pb::log_line::Level::Info => self.log.info(Some(obj), text),
                pb::log_line::Level::Warning => self.log.warn(Some(obj), text),
                pb::log_line::Level::Error => self.log.error(Some(obj), text),
            }
        }
    }

    /// Posts events about `body` (or the object each names); failures are logged.
    pub async fn post_events(&self, body: &Value, list: impl Iterator<Item = &pb::Event>) {
        let regarding = events::Regarding::of(body);
        for e in list {
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
}
