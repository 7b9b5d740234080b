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

use std::sync::Arc;

use serde_json::Value;

use super::{CallOutcome, Cycle, Invocation};
use crate::logs::Level;
use crate::state::outcomes::{Verdict, precheck, record_limit_failure};
use crate::state::progress::{ProgressRecord, format_time};

/// A sub-handler's own id, as its parent gave it: `item1` for `create_fn/item1`.
fn own_id<'a>(parent: &str, child: &'a str) -> &'a str {
    child.strip_prefix(parent).and_then(|rest| rest.strip_prefix('/')).unwrap_or(child)
}

impl Cycle {
    /// The next call to make, depth first through sub-handlers, in registration order; `None`
    /// when every due (sub-)handler was called once, is finished, or waits for its delay.
    pub fn next_call(&mut self) -> Option<Invocation> {
        for i in 0..self.due.len() {
            let id = self.due[i].handler.id.clone();
            if let Some(inv) = self.visit(i, id, None, None) {
                return Some(inv);
            }
        }
        None
    }

    fn visit(&mut self, i: usize, id: String, parent: Option<String>, param: Option<Value>) -> Option<Invocation> {
        if self.finished(&id) {
            return None;
        }
        let prev = self.records.get(&id).cloned();
        let mut finishes = Vec::new();
        if let Some(children) = prev.as_ref().and_then(|r| r.subrefs.clone()).filter(|c| !c.is_empty()) {
            for child in &children {
                let p = self.records.get(child).and_then(|r| r.param.clone());
                if let Some(inv) = self.visit(i, child.clone(), Some(id.clone()), p) {
                    return Some(inv);
                }
            }
            if !children.iter().all(|c| self.finished(c)) {
                return None;
            }
            if !self.due[i].handler.finishes_parents {
                self.settle_parent(&id, &children);
                return None;
            }
            finishes = children.iter().map(|c| own_id(&id, c).to_string()).collect();
        }
        if let Some(until) = prev.as_ref().and_then(ProgressRecord::delayed_until).filter(|u| *u > self.now) {
            self.wake_at(until);
            return None;
        }
        // One attempt per cycle, and one finishing call: a parent may be called, its
        // sub-handlers run and it be finished in one cycle; a finishing call that is due again
        // (its answer added sub-handlers, which ran) is made by the next cycle, at once.
        let first = if finishes.is_empty() { self.attempted.insert(id.clone()) } else { self.finishing.insert(id.clone()) };
        if !first {
            self.again |= !finishes.is_empty();
            return None;
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
            return None;
        }
        if finishes.is_empty() {
            self.line(Level::Debug, format!("Handler '{id}' is invoked."));
        } else {
            self.line(Level::Debug, format!("Handler '{id}' is invoked to finish, its sub-handlers being done: {}.", finishes.join(", ")));
        }
        Some(Invocation {
            due: i,
            retry: prev.as_ref().and_then(|r| r.retries).unwrap_or(0),
            started: prev.as_ref().and_then(ProgressRecord::started_at).unwrap_or(self.now),
            id,
            parent,
            param,
            finishes,
        })
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
