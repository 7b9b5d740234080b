//! Writes the API server refused because of a handler's patch: that handler fails, and what of
//! it an earlier write of the same cycle already stored is taken back where a merge patch can.
//! The status write goes first (the main write carries the diffbase, the cause's commit), so a
//! handler whose main patch is refused may have had its result stored already.

use serde_json::{Value, json};

use super::types::{Cycle, Subject};
use crate::logs::{Level, Line};
use crate::state::outcomes::{Verdict, record_limit_failure};
use crate::state::patches::compose_over;

impl Cycle {
    /// Fails the calls `culprits` because the API server refused their patches: they lose
    /// their patches and results, their records say why.
    pub fn reject(&mut self, culprits: &[String], message: &str) {
        let purpose = self.reason.purpose();
        let why = format!("its patch was rejected by the API server: {message}");
        for c in self.calls.iter_mut().filter(|c| culprits.contains(&c.id)) {
            self.lines.push(Line::new(Level::Error, Verdict::Failed(why.clone()).log_line(&c.id)));
            let prev = self.records.get(&c.id).cloned();
            self.records.insert(c.id.clone(), record_limit_failure(prev.as_ref(), purpose, &why, self.now));
            if c.result.is_some() && !self.retracted.contains(&c.id) {
                self.retracted.push(c.id.clone());
            }
            c.verdict = Verdict::Failed(why.clone());
            c.result = None;
            c.main_patch = None;
            c.status_patch = None;
            c.json_patch = None;
        }
    }

    /// Adds to the status write the removal of results that refused calls may have stored in
    /// an earlier write of this cycle: a result the object did not hold before goes. (One it
    /// held is left: a merge patch cannot put an object back over one merged into it.)
    pub(super) fn retract_results(&self, subject: &Subject, body: &Value, status: &mut Value) {
        if !(subject.has_status && subject.status_keeps_unknown) {
            return; // Results in annotations travel in the main write, which was refused.
        }
        for id in &self.retracted {
            if body.get("status").and_then(|s| s.get(id)).is_none() {
                compose_over(body, status, &json!({"status": {id.as_str(): null}}));
            }
        }
    }
}
