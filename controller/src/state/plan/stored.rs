//! What the object says of the controller's state: every record the cycle reads, however
//! the records name each other (bounded, each read once), and what cannot be read, which is
//! said in a line and a Warning event rather than passed over in silence.

use std::collections::HashSet;

use bosun_proto::v1 as pb;
use serde_json::Value;

use super::calls;
use super::types::Subject;
use crate::logs::{Level, Line};
use crate::state::storage::ObjectState;

impl Subject<'_> {
    /// Every (sub-)handler id with state on the object: the handlers' own and, recursively,
    /// the sub-handlers their records name, at most [`calls::MAX_RECORDS`] of them (each
    /// read once, whatever cycles the records make); and the ids named beyond that bound.
    pub(super) fn read_state(&self, body: &Value) -> (ObjectState, Vec<String>, HashSet<String>) {
        // One id may serve several causes (create and update): each is read once.
        let mut ids: Vec<String> = Vec::new();
        for h in self.handlers {
            if !ids.contains(&h.id) {
                ids.push(h.id.clone());
            }
        }
        let mut known: HashSet<String> = ids.iter().cloned().collect();
        let mut unread = HashSet::new();
        let mut state = self.storage.read(body, ids.iter().map(String::as_str));
        let mut fresh = ids.clone();
        while !fresh.is_empty() {
            let mut next = Vec::new();
            for r in fresh.iter().filter_map(|id| state.progress.get(id)) {
                for s in r.subrefs.iter().flatten() {
                    if known.contains(s) {
                        continue;
                    }
                    if known.len() < calls::MAX_RECORDS {
                        known.insert(s.clone());
                        next.push(s.clone());
                    } else {
                        unread.insert(s.clone());
                    }
                }
            }
            state.progress.extend(self.storage.read(body, next.iter().map(String::as_str)).progress);
            ids.extend(next.iter().cloned());
            fresh = next;
        }
        (state, ids, unread)
    }
}

/// The lines and Warning events about stored state that cannot be read: a diffbase (the object
/// is then handled as new) and progress records (their handlers count as not started).
pub(super) fn malformed_notes(
    subject: &Subject,
    body: &Value,
    ids: &[String],
    unreadable_base: bool,
    lines: &mut Vec<Line>,
) -> Vec<pb::Event> {
    let mut said = Vec::new();
    if unreadable_base {
        said.push((
            "MalformedDiffbase",
            "The last handled configuration on the object cannot be read; the object is handled as new.".to_string(),
        ));
    }
    for id in subject.storage.unreadable(body, ids.iter().map(String::as_str)) {
        said.push((
            "MalformedProgress",
            format!("The progress record of handler '{id}' on the object cannot be read; it counts as not started."),
        ));
    }
    said.into_iter()
        .map(|(reason, text)| {
            lines.push(Line::new(Level::Warn, text.clone()));
            pb::Event { r#type: "Warning".into(), reason: reason.into(), message: text, regarding: None }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{World, body, handle};
    use super::super::*;

    #[test]
    fn state_that_cannot_be_read_is_said_and_the_cycle_goes_on() {
        let w = World::new(&[("p", pb::HandlerKind::Create), ("q", pb::HandlerKind::Create)]);
        let mut b = body(json!({}), false, false, None, json!({"p": "garbage", "q": {"purpose": "create", "retries": 1}}));
        b["status"]["bosun.dev"]["last-handled-configuration"] = json!("{not json");
        let mut cycle = handle(&w, &b);
        assert_eq!(cycle.reason, crate::state::causes::Reason::Create, "handled as new");
        let lines: Vec<String> = cycle.take_lines().into_iter().map(|l| l.text).collect();
        let want = [
            "The last handled configuration on the object cannot be read; the object is handled as new.",
            "The progress record of handler 'p' on the object cannot be read; it counts as not started.",
        ];
        for line in want {
            assert!(lines.iter().any(|l| l == line), "no {line:?} in {lines:?}");
        }
        while let Some(inv) = cycle.next_call() {
            assert_eq!(inv.retry, u32::from(inv.id == "q"), "{}: p's record counts as none, q's is read", inv.id);
            cycle.absorb(&w.subject(), &b, &inv, Ok(super::super::tests::success()));
        }
        let (writes, _) = cycle.conclude(&w.subject(), &b, None);
        let reasons: Vec<&str> = writes.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["MalformedDiffbase", "MalformedProgress"]);
        assert!(writes.events.iter().all(|e| e.r#type == "Warning"));
    }
}
