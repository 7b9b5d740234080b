//! The plan of one handling cycle: from what was observed to everything the controller does
//! about it — the cause, the due handlers, the calls to make (one at a time, sub-handlers
//! included), the records' transitions, the finalizer, the one main patch and the one status
//! patch, events, log lines, and what comes next.
//!
//! Pure, as Kopf's causation and progression are: the runtime asks [`begin`] what to do, calls
//! the handler servers that [`Cycle::next_call`] names and feeds their answers to
//! [`Cycle::absorb`], writes what [`Cycle::conclude`] computes, and, when the API server
//! refuses a handler's patch, tells [`Cycle::reject`] whose it was. Nothing here waits or talks.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bosun_proto::v1 as pb;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::causes::{Observation, Reason, detect};
use super::diff::diff;
use super::essence::{essence, matches as essence_matches};
use super::outcomes::{Answer, Attempt, Verdict, attempt_of, record_attempt};
use super::patches::{check_merge_patch, compose_over, split_status};
use super::progress::{ProgressRecord, annotation_key};
use super::registry::Handler;
use super::storage::ObjectState;
use crate::logs::{Level, Line};
use crate::object;
use answer::{Checked, check};
pub use calls::{MAX_DEPTH, MAX_RECORDS};
pub use diffbase::{STATUS_DIFFBASE_LIMIT, digest_diffbase};
use diffbase::{Stored, stored_base};
use stored::malformed_notes;
pub use types::{CallOutcome, Cycle, Due, Invocation, Next, Start, Subject, Writes};

/// The object's `metadata.deletionTimestamp` is set.
pub fn deletion_requested(body: &Value) -> bool {
    object::meta(body, "deletionTimestamp").is_some_and(|v| !v.is_null())
}

/// The annotation that keeps a handler's result on resources whose status cannot.
pub fn result_annotation(prefix: &str, id: &str) -> String {
    annotation_key(prefix, &format!("{id}.result"))
}

impl Subject<'_> {
    /// Checks a handler's merge patch and adds it to `w` (timers and daemons, which write
    /// theirs at once; a cycle checks patches when it absorbs the answers).
    pub fn add_checked_patch(&self, base: &Value, patch: &Value, w: &mut Writes) -> Result<(), super::patches::UnusablePatch> {
        check_merge_patch(patch)?;
        self.add_patch(base, patch, &mut w.main, &mut w.status);
        Ok(())
    }

    /// Adds a handler's merge patch to the writes: its `status` part goes to the status write
    /// where the resource has a status subresource, the rest to the main write.
    pub fn add_patch(&self, base: &Value, patch: &Value, main: &mut Value, status: &mut Value) {
        if !self.has_status {
            return compose_over(base, main, patch);
        }
        let (st, rest) = split_status(patch);
        if let Some(p) = rest {
            compose_over(base, main, &p);
        }
        if let Some(p) = st {
            compose_over(base, status, &p);
        }
    }

    /// Adds a handler's result: `status.<id>` where the status keeps unknown fields, else an
    /// annotation (the status would prune it).
    pub fn add_result(&self, base: &Value, id: &str, result: &Value, main: &mut Value, status: &mut Value) {
        if self.status_keeps_unknown {
            let p = json!({"status": {id: result}});
            compose_over(base, if self.has_status { status } else { main }, &p);
        } else {
            let text = serde_json::to_string(result).expect("JSON values serialize");
            compose_over(base, main, &json!({"metadata": {"annotations": {result_annotation(&self.storage.prefix, id): text}}}));
        }
    }
}

/// Starts a cycle for `body` (never called for DELETED watch events: those end the object).
/// `first_sight`: this controller has not finished a cycle of this object yet. `essence`: the
/// body's essence when the caller has computed it already (it is computed here otherwise).
pub fn begin(subject: &Subject, body: &Value, essence_known: Option<Value>, first_sight: bool, now: DateTime<Utc>) -> Start {
    let relevant: Vec<&Arc<Handler>> = subject.handlers.iter().filter(|h| h.matches_object(body)).collect();
    let has_finalizer = subject.storage.has_finalizer(body);
    let deleting = deletion_requested(body);
    if relevant.is_empty() && !has_finalizer {
        return Start::Idle(Vec::new());
    }
    let wants_finalizer = relevant.iter().any(|h| h.requires_finalizer());
    if wants_finalizer && !has_finalizer && !deleting {
        let line = Line::new(Level::Info, "Adding the finalizer, thus preventing the actual deletion.");
        return Start::AddFinalizer(Box::new(Writes { finalizer: Some(true), ..Writes::none() }), vec![line]);
    }
    let (stored, ids, unread) = subject.read_state(body);
    let base = stored_base(stored.diffbase.as_deref());
    let unreadable_base = stored.diffbase.is_some() && matches!(base, Stored::Nothing);
    // The essence is built only when needed: comparing with a stored one walks the body.
    let mut new_essence = essence_known;
    let changed = match &base {
        Stored::Nothing => true,
        Stored::Essence(old) => new_essence.as_ref().map_or_else(|| !essence_matches(body, subject.rules, old), |e| old != e),
        Stored::Digest(d) => *d != digest_diffbase(new_essence.get_or_insert_with(|| essence(body, subject.rules))),
    };
    let mut reason = detect(Observation {
        deleted_event: false,
        deletion_requested: deleting,
        has_finalizer,
        has_diffbase: !matches!(base, Stored::Nothing),
        changed,
        first_sight,
    });
    let unfinished = |purpose: &str| stored.progress.values().any(|r| r.purpose.as_deref() == Some(purpose) && !r.finished());
    if reason == Reason::Noop && unfinished("resume") {
        reason = Reason::Resume;
    }
    // Nothing to do, unless a finalizer nobody needs any more is to be released.
    let releases_finalizer = reason == Reason::Noop && has_finalizer && !wants_finalizer;
    if matches!(reason, Reason::Free | Reason::Noop) && !releases_finalizer {
        return Start::Idle(reason.idle_line().into_iter().collect());
    }
    let new_essence = new_essence.unwrap_or_else(|| essence(body, subject.rules));
    let old_essence = match (&base, reason) {
        (Stored::Essence(old), Reason::Update) => Some(old),
        _ => None,
    };
    let diff_items = if old_essence.is_some() { diff(old_essence, Some(&new_essence)) } else { Vec::new() };
    let purpose = reason.purpose();
    let records: BTreeMap<String, ProgressRecord> =
        stored.progress.iter().filter(|(_, r)| r.purpose.as_deref() == Some(purpose)).map(|(k, r)| (k.clone(), r.clone())).collect();
    let due = relevant
        .iter()
        .filter(|h| {
            // Resume handlers join an update or a deletion only on first sight (Kopf mixes them
            // into the causes of its first listing, "cuckoo-style"), or to finish what they
            // started; a deletion only when asked to (`deleted`).
            let started = || records.get(&h.id).is_some_and(|r| !r.finished());
            h.kind != pb::HandlerKind::Resume
                || match reason {
                    Reason::Update => first_sight || started(),
                    Reason::Delete => h.deleted && (first_sight || started()),
                    _ => true,
                }
        })
        .filter_map(|h| h.due(reason, old_essence, &new_essence, &diff_items).map(|(old, new)| Due { handler: Arc::clone(h), old, new }))
        .fold(Vec::<Due>::new(), |mut due, d| {
            // One id is one progress record: as in Kopf, a function registered for several of
            // the cause's kinds (`@on.update` and `@on.resume` stacked) runs once, the first.
            if !due.iter().any(|e| e.handler.id == d.handler.id) {
                due.push(d);
            }
            due
        });
    let mut lines: Vec<Line> = reason.idle_line().into_iter().collect();
    let notes = malformed_notes(subject, body, &ids, unreadable_base, &mut lines);
    if let Stored::Digest(_) = base
        && reason == Reason::Update
    {
        lines.push(Line::new(Level::Debug, "Only a digest of the last handled state is stored: the update comes without a diff."));
    }
    Start::Handle(Box::new(Cycle {
        reason,
        diff: diff_items,
        now,
        due,
        has_finalizer,
        wants_finalizer,
        stored,
        stored_current: !changed,
        ids,
        unread,
        new_essence,
        records,
        attempted: HashSet::new(),
        finishing: HashSet::new(),
        again: false,
        answered: None,
        skipped: HashSet::new(),
        calls: Vec::new(),
        retracted: Vec::new(),
        wake: None,
        unreachable: false,
        lines,
        notes,
    }))
}

impl Cycle {
    /// The lines decided since the last call (to be logged with the object's prefix).
    pub fn take_lines(&mut self) -> Vec<Line> {
        std::mem::take(&mut self.lines)
    }

    /// The due handler number `i` and the old/new values it receives.
    pub fn due(&self, i: usize) -> &Due {
        &self.due[i]
    }

    /// The outcomes of the calls made so far.
    pub fn calls(&self) -> &[CallOutcome] {
        &self.calls
    }

    /// Whether a handler server could not be reached in this cycle.
    pub fn unreachable(&self) -> bool {
        self.unreachable
    }

    fn line(&mut self, level: Level, text: String) {
        self.lines.push(Line::new(level, text));
    }

    fn wake_at(&mut self, t: DateTime<Utc>) {
        self.wake = Some(self.wake.map_or(t, |w| w.min(t)));
    }

    fn finished(&self, id: &str) -> bool {
        self.skipped.contains(id) || self.records.get(id).is_some_and(ProgressRecord::finished)
    }

    /// Takes in the answer to `inv`: `Err` when there was none (unreachable server: nothing
    /// is recorded; a broken call: the handler's unexpected error).
    pub fn absorb(&mut self, subject: &Subject, body: &Value, inv: &Invocation, reply: Result<pb::HandleResponse, Answer>) {
        let answer = match reply {
            Ok(a) => a,
            Err(Answer::Unreachable(why)) => {
                self.line(Level::Debug, format!("Handler '{}' could not be called: {why}. Will retry.", inv.id));
                self.unreachable = true;
                return;
            }
            Err(Answer::Broken(why)) => {
                pb::HandleResponse { outcome: pb::Outcome::UnexpectedError as i32, message: why, ..Default::default() }
            }
            Err(Answer::Answered { outcome, message, delay }) => {
                pb::HandleResponse { outcome: outcome as i32, message, delay_seconds: delay, ..Default::default() }
            }
        };
        let h = Arc::clone(&self.due[inv.due].handler);
        let id = inv.id.clone();
        for l in &answer.logs {
            self.line(Level::of_pb(l.level), l.message.clone());
        }
        let prev = self.records.get(&id).cloned();
        let outcome = pb::Outcome::try_from(answer.outcome).unwrap_or(pb::Outcome::UnexpectedError);
        let (attempt, checked) = match check(&answer, &id) {
            Err(why) => (Attempt::unexpected(why.to_string()), None),
            Ok(c) => {
                let given = Answer::Answered { outcome, message: answer.message.clone(), delay: answer.delay_seconds };
                let attempt = attempt_of(&given, c.result.clone()).expect("an answer is an attempt");
                (attempt, Some(c))
            }
        };
        let Checked { result, merge, json_patch, children } =
            checked.unwrap_or(Checked { result: None, merge: None, json_patch: None, children: Vec::new() });
        let (record, verdict) = record_attempt(&h, prev.as_ref(), self.reason.purpose(), &attempt, self.now);
        let line = verdict.log_line(&id);
        // A skipped handler (its `when=` said no) has nothing to save: the next one goes on in
        // this cycle (it is not called again in it, and not recorded).
        if verdict != Verdict::Skipped {
            self.answered.get_or_insert(inv.due);
        }
        let events = answer.events;
        // Sub-handlers it registered before (a finishing call declares them again) are known.
        let known = prev.as_ref().and_then(|r| r.subrefs.as_deref()).unwrap_or_default();
        let registers = verdict == Verdict::Succeeded && children.iter().any(|(full, _)| !known.contains(full));
        match &verdict {
            Verdict::Succeeded if !registers => self.line(Level::Info, line),
            // A parent's success is logged once its sub-handlers are done.
            Verdict::Succeeded => {}
            Verdict::Skipped => self.line(Level::Debug, line),
            Verdict::Retry { until, .. } => {
                let until = *until;
                self.line(Level::Warn, line);
                self.wake_at(until);
            }
            Verdict::Ignored(_) => self.line(Level::Warn, line),
            Verdict::Failed(_) => self.line(Level::Error, line),
        }
        // Patches of failed attempts still apply (as in Kopf); skipped handlers change nothing.
        let (main_patch, status_patch) = match (&verdict, merge) {
            (Verdict::Skipped, _) | (_, None) => (None, None),
            (_, Some(m)) => {
                let (mut main, mut status) = (json!({}), json!({}));
                subject.add_patch(body, &m, &mut main, &mut status);
                let some = |v: Value| Some(v).filter(|v| v.as_object().is_some_and(|o| !o.is_empty()));
                (some(main), some(status))
            }
        };
        let json_patch = if verdict == Verdict::Skipped { None } else { json_patch };
        match record {
            Some(r) => {
                self.records.insert(id.clone(), r);
            }
            None => {
                self.skipped.insert(id.clone());
                self.records.remove(&id);
            }
        }
        self.calls.push(CallOutcome { id: id.clone(), verdict, result, main_patch, status_patch, json_patch, events });
        if registers {
            self.register(&id, children);
        }
    }

    /// The writes of the cycle and what comes next. `hold_finalizer`: something else still
    /// needs the object (a daemon that has not ended yet), so a finished deletion keeps the
    /// finalizer for now, and the records of its handlers (so that they are not called again),
    /// and comes back then at the latest.
    pub fn conclude(&mut self, subject: &Subject, body: &Value, hold_finalizer: Option<DateTime<Utc>>) -> (Writes, Next) {
        let reason = self.reason;
        let done = self.due.iter().all(|d| self.finished(&d.handler.id)) && !self.unreachable;
        let deletion_done = reason == Reason::Delete && done;
        let held = deletion_done && hold_finalizer.is_some();
        let mut desired = ObjectState { diffbase: self.stored.diffbase.clone(), progress: self.records.clone() };
        let mut writes = Writes::none();
        if done && !held {
            desired.progress.clear();
            // A stored diffbase that says the same stays as written (by Kopf, by an older
            // build, in another spelling of the same JSON): no write for nothing.
            if reason.stores_diffbase() && !self.stored_current {
                desired.diffbase = Some(self.diffbase_to_store(subject, body, &mut writes.events));
            }
            if !self.due.is_empty() {
                let top: Vec<&ProgressRecord> = self.due.iter().filter_map(|d| self.records.get(&d.handler.id)).collect();
                let ok = top.iter().filter(|r| r.success == Some(true)).count();
                let failed = top.iter().filter(|r| r.failure == Some(true)).count();
                self.line(Level::Info, format!("{} is processed: {ok} succeeded; {failed} failed.", reason.title()));
            }
        }
        let finalizer_wanted = if reason == Reason::Delete { !done || held } else { self.wants_finalizer };

        let (mut main, mut status) = (json!({}), json!({}));
        for c in &self.calls {
            if let Some(p) = &c.main_patch {
                compose_over(body, &mut main, p);
            }
            if let Some(p) = &c.status_patch {
                compose_over(body, if subject.has_status { &mut status } else { &mut main }, p);
            }
            if let (Some(result), Verdict::Succeeded | Verdict::Ignored(_)) = (&c.result, &c.verdict) {
                subject.add_result(body, &c.id, result, &mut main, &mut status);
            }
        }
        self.retract_results(subject, body, &mut status);
        // The state is not worth writing on an object about to go (unless it is held).
        if !deletion_done || held {
            let mut ids: Vec<&str> = self.ids.iter().map(String::as_str).collect();
            for id in self.records.keys().filter(|id| !self.ids.contains(id)) {
                ids.push(id);
            }
            let replaced = if subject.has_status {
                subject.storage.patch(body, &desired, &ids, &mut main, &mut status)
            } else {
                let mut tmp = json!({});
                let replaced = subject.storage.patch(body, &desired, &ids, &mut main, &mut tmp);
                compose_over(body, &mut main, &tmp);
                replaced
            };
            if !replaced.is_empty() {
                let patched_by: Vec<&str> =
                    self.calls.iter().filter(|c| c.main_patch.is_some() || c.status_patch.is_some()).map(|c| c.id.as_str()).collect();
                self.line(
                    Level::Warn,
                    format!(
                        "The patch of handler(s) '{}' replaces where the controller keeps its state ({}); the state is kept and that part of the patch is not applied.",
                        patched_by.join("', '"),
                        replaced.join(", ")
                    ),
                );
            }
        }
        if finalizer_wanted != self.has_finalizer {
            writes.finalizer = Some(finalizer_wanted);
            if finalizer_wanted {
                self.line(Level::Info, "Adding the finalizer, thus preventing the actual deletion.".into());
            } else if reason == Reason::Delete {
                self.line(Level::Debug, "Removing the finalizer, as the deletion is processed.".into());
            } else {
                self.line(Level::Info, "Removing the finalizer, as there are no handlers requiring it.".into());
            }
        }
        // With a status subresource: handlers' patches of the main resource are written before
        // the status write that records their success, the rest of the main write (the
        // diffbase above all) after it (see `runtime::writes`). Without one, all of it goes in
        // one main write.
        if subject.has_status {
            writes.last = if self.calls.iter().any(|c| c.main_patch.is_some()) {
                subject.storage.take_diffbase(body, &mut main)
            } else {
                std::mem::replace(&mut main, json!({}))
            };
        }
        writes.main = main;
        writes.status = status;
        writes.json_patches = self.calls.iter().filter_map(|c| c.json_patch.clone().map(|p| (c.id.clone(), p))).collect();
        let mut events: Vec<pb::Event> = self.notes.clone();
        events.extend(self.calls.iter().flat_map(|c| c.events.iter().cloned()));
        events.append(&mut writes.events);
        writes.events = events;
        let next = if self.unreachable {
            Next::Throttled(self.wake)
        } else if held {
            Next::WakeAt(hold_finalizer.unwrap_or(self.now))
        } else if done {
            Next::Idle
        } else if self.again {
            Next::Now
        } else {
            self.wake.map_or(Next::Idle, Next::WakeAt)
        };
        (writes, next)
    }
}

mod answer;
mod calls;
mod diffbase;
mod refused;
mod stored;
mod types;

#[cfg(test)]
mod tests;
