//! Which call a cycle makes next, and the bookkeeping of sub-handlers: depth first through the
//! sub-handlers a parent registered, one attempt of each per cycle, delays honoured.
//!
//! A parent is finished in one of two ways. Without `finishes_parents` (the Rust SDK,
//! third-party servers) it is finished when its sub-handlers are: succeeded if they all
//! succeeded, failed otherwise. With it (Kopf's `kopf.execute()`), once every sub-handler is
//! finished, whatever its outcome, the parent is called once more with their ids
//! (`finished_subhandlers`), and that answer is the parent's own, absorbed like any answer; new
//! sub-handlers in it run first and the parent is called again after them. Everything needed is
//! in the progress records (the parent's `subrefs`, the children's outcomes), so a controller
//! restarted between the last child and the finishing call makes that call and runs no child
//! again.

use std::collections::HashSet;
use std::sync::Arc;

use bosun_proto::v1 as pb;
use serde_json::Value;

use super::types::{CallOutcome, Cycle, Invocation};
use crate::logs::Level;
use crate::state::outcomes::{Verdict, precheck, record_limit_failure};
use crate::state::progress::{ProgressRecord, format_time};

/// The most levels of sub-handlers under a handler: deeper records are malformed (each level
/// is one recursion of the walk, so the walk's stack is bounded whatever the object says).
pub const MAX_DEPTH: usize = 32;

/// The most (sub-)handler records of one object that a cycle reads: a record graph that
/// names more is malformed, so a hostile record costs bounded time and memory. A handler's
/// sub-handlers are a few records each of ~150 bytes; 4096 of them fill 600 KiB, more than
/// the API server allows in annotations (256 KiB) and a good part of an object (1.5 MiB).
pub const MAX_RECORDS: usize = 4096;

/// A sub-handler's own id, as its parent gave it: `item1` for `create_fn/item1`.
fn own_id<'a>(parent: &str, child: &'a str) -> &'a str {
    child.strip_prefix(parent).and_then(|rest| rest.strip_prefix('/')).unwrap_or(child)
}

/// What the walk through one handler's sub-handlers found.
enum Step {
    /// This call is next.
    Call(Invocation),
    /// Nothing to call now under this (sub-)handler.
    Nothing,
    /// The records under the handler cannot be followed (why): the handler fails.
    Malformed(String),
}

/// One walk from a due handler down its sub-handlers: the ids met so far.
#[derive(Default)]
struct Walk {
    met: HashSet<String>,
}

impl Cycle {
    /// The next call to make, depth first through sub-handlers, in registration order; `None`
    /// when every due (sub-)handler was called once, is finished, or waits for its delay. A
    /// handler whose records name sub-handlers in a cycle, twice, too deep or beyond
    /// [`MAX_RECORDS`] fails permanently, with a Warning event: those records are the
    /// object's, anyone who may edit it may write them, and Kopf fails a handler for good
    /// when what it needs cannot be had, rather than retrying what cannot change.
    ///
    /// Kopf's order: once a handler has answered, another due handler is not called in the
    /// same cycle. The cycle ends, its outcome is written, and the next cycle (at once, on the
    /// body that write returned) calls it: a later handler sees the earlier ones' results, and
    /// a crash or a handover never throws away an answered success. The sub-handlers of the
    /// handler that answered (and its finishing call) go on in the same cycle, as they run
    /// within their parent's call in Kopf.
    pub fn next_call(&mut self) -> Option<Invocation> {
        for i in 0..self.due.len() {
            let id = self.due[i].handler.id.clone();
            match self.visit(i, id, None, None, 0, &mut Walk::default()) {
                Step::Call(inv) if self.answered.is_some_and(|a| a != inv.due) => {
                    self.defer(&inv);
                    return None;
                }
                Step::Call(inv) => {
                    let line = if inv.finishes.is_empty() {
                        format!("Handler '{}' is invoked.", inv.id)
                    } else {
                        format!("Handler '{}' is invoked to finish, its sub-handlers being done: {}.", inv.id, inv.finishes.join(", "))
                    };
                    self.line(Level::Debug, line);
                    return Some(inv);
                }
                Step::Nothing => {}
                Step::Malformed(why) => self.fail_malformed(i, &why),
            }
        }
        None
    }

    /// Leaves `inv` to the next cycle, which comes at once. Every due handler without a record
    /// gets one, started now (as Kopf records all of a cause's handlers at its first write),
    /// so that the next cycle finds it due though it is no longer a first sight (resume
    /// handlers join an update only then, or when started).
    fn defer(&mut self, inv: &Invocation) {
        self.attempted.remove(&inv.id);
        self.finishing.remove(&inv.id);
        self.again = true;
        let (purpose, now) = (self.reason.purpose(), format_time(self.now));
        for d in &self.due {
            let id = &d.handler.id;
            if !self.records.contains_key(id) && !self.skipped.contains(id) {
                let started = ProgressRecord { started: Some(now.clone()), purpose: Some(purpose.to_string()), ..Default::default() };
                self.records.insert(id.clone(), started);
            }
        }
    }

    /// Fails the due handler `i` for good: its records are malformed.
    fn fail_malformed(&mut self, i: usize, why: &str) {
        let id = self.due[i].handler.id.clone();
        let message = format!("its progress records on the object are malformed: {why}");
        let verdict = Verdict::Failed(message.clone());
        let line = verdict.log_line(&id);
        self.line(Level::Error, line.clone());
        let prev = self.records.get(&id).cloned();
        self.records.insert(id.clone(), record_limit_failure(prev.as_ref(), self.reason.purpose(), &message, self.now));
        let event = pb::Event { r#type: "Warning".into(), reason: "MalformedProgress".into(), message: line, regarding: None };
        self.calls.push(CallOutcome {
            id,
            verdict,
            result: None,
            main_patch: None,
            status_patch: None,
            json_patch: None,
            events: vec![event],
        });
    }

    fn visit(&mut self, i: usize, id: String, parent: Option<String>, param: Option<Value>, depth: usize, walk: &mut Walk) -> Step {
        if self.finished(&id) {
            return Step::Nothing;
        }
        if !walk.met.insert(id.clone()) {
            let by = parent.as_deref().unwrap_or_default();
            return Step::Malformed(format!("sub-handler '{id}' is listed under itself (by '{by}'): a cycle"));
        }
        let prev = self.records.get(&id).cloned();
        let mut finishes = Vec::new();
        if let Some(children) = prev.as_ref().and_then(|r| r.subrefs.clone()).filter(|c| !c.is_empty()) {
            if depth >= MAX_DEPTH {
                return Step::Malformed(format!("sub-handlers are nested deeper than {MAX_DEPTH} levels under '{id}'"));
            }
            if let Some(why) = self.unfollowable(&id, &children, walk) {
                return Step::Malformed(why);
            }
            for child in &children {
                let p = self.records.get(child).and_then(|r| r.param.clone());
                match self.visit(i, child.clone(), Some(id.clone()), p, depth + 1, walk) {
                    Step::Nothing => {}
                    found => return found,
                }
            }
            if !children.iter().all(|c| self.finished(c)) {
                return Step::Nothing;
            }
            if !self.due[i].handler.finishes_parents {
                self.settle_parent(&id, &children);
                return Step::Nothing;
            }
            finishes = children.iter().map(|c| own_id(&id, c).to_string()).collect();
        }
        if let Some(until) = prev.as_ref().and_then(ProgressRecord::delayed_until).filter(|u| *u > self.now) {
            self.wake_at(until);
            return Step::Nothing;
        }
        // One attempt per cycle, and one finishing call: a parent may be called, its
        // sub-handlers run and it be finished in one cycle; a finishing call that is due again
        // (its answer added sub-handlers, which ran) is made by the next cycle, at once.
        let first = if finishes.is_empty() { self.attempted.insert(id.clone()) } else { self.finishing.insert(id.clone()) };
        if !first {
            self.again |= !finishes.is_empty();
            return Step::Nothing;
        }
        let h = Arc::clone(&self.due[i].handler);
        if let Some(message) = precheck(&h, prev.as_ref(), self.now) {
            self.line(Level::Error, Verdict::Failed(message.clone()).log_line(&id));
            self.records.insert(id.clone(), record_limit_failure(prev.as_ref(), self.reason.purpose(), &message, self.now));
            self.calls.push(CallOutcome {
                id,
                verdict: Verdict::Failed(message),
                result: None,
                main_patch: None,
                status_patch: None,
                json_patch: None,
                events: Vec::new(),
            });
            return Step::Nothing;
        }
        Step::Call(Invocation {
            due: i,
            retry: prev.as_ref().and_then(|r| r.retries).unwrap_or(0),
            started: prev.as_ref().and_then(ProgressRecord::started_at).unwrap_or(self.now),
            id,
            parent,
            param,
            finishes,
        })
    }

    /// Why the sub-handlers `children` that `id`'s record lists cannot be followed, if they
    /// cannot: sub-handlers beyond [`MAX_RECORDS`], one listed twice, or one not named after
    /// its parent (cycles are found as the walk meets an id again).
    fn unfollowable(&self, id: &str, children: &[String], walk: &Walk) -> Option<String> {
        let mut listed = HashSet::new();
        for child in children {
            if self.unread.contains(child) {
                return Some(format!("they name more than {MAX_RECORDS} sub-handlers"));
            }
            if !listed.insert(child.as_str()) {
                return Some(format!("sub-handler '{child}' is listed twice by '{id}'"));
            }
            let named = child.strip_prefix(id).is_some_and(|rest| rest.len() > 1 && rest.starts_with('/'));
            if !named && !walk.met.contains(child) {
                return Some(format!("sub-handler '{child}' of '{id}' is not named '{id}/…'"));
            }
        }
        None
    }

    /// A parent of a server that does not finish parents is finished when all its
    /// sub-handlers are: succeeded if all succeeded.
    fn settle_parent(&mut self, id: &str, children: &[String]) {
        let failed: Vec<String> =
            children.iter().filter(|c| self.records.get(*c).is_some_and(|r| r.failure == Some(true))).cloned().collect();
        let now = format_time(self.now);
        let Some(parent) = self.records.get_mut(id) else { return };
        parent.stopped = Some(now);
        parent.delayed = None;
        if failed.is_empty() {
            parent.success = Some(true);
            self.line(Level::Info, Verdict::Succeeded.log_line(id));
        } else {
            let message = format!("sub-handler(s) failed: {}", failed.join(", "));
            parent.failure = Some(true);
            parent.message = Some(message.clone());
            self.line(Level::Error, Verdict::Failed(message).log_line(id));
        }
    }

    /// Records the sub-handlers `children` (full ids, with their parameters) that a successful
    /// answer of `id` declared: those it registered before are left as they are, new ones are
    /// added to its `subrefs`, and while any is new the parent is not finished. Returns whether
    /// any was new.
    pub(super) fn register(&mut self, id: &str, children: Vec<(String, Option<Value>)>) -> bool {
        let known = self.records.get(id).and_then(|r| r.subrefs.clone()).unwrap_or_default();
        let new: Vec<(String, Option<Value>)> = children.into_iter().filter(|(full, _)| !known.contains(full)).collect();
        if new.is_empty() {
            return false;
        }
        let ids: Vec<String> = new.iter().map(|(full, _)| full.clone()).collect();
        self.line(Level::Debug, format!("Handler '{id}' registered sub-handlers: {}.", ids.join(", ")));
        if let Some(parent) = self.records.get_mut(id) {
            parent.subrefs = Some(known.into_iter().chain(ids).collect());
            parent.success = None;
            parent.stopped = None;
        }
        let purpose = self.reason.purpose();
        for (full, param) in new {
            self.records.entry(full).or_insert(ProgressRecord { purpose: Some(purpose.into()), param, ..Default::default() });
        }
        true
    }
}

#[cfg(test)]
#[path = "calls_tests.rs"]
mod tests;
