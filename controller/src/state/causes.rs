//! Cause detection: why an object is worth the handlers' attention right now.
//!
//! A pure function of what was seen (event type, deletion, finalizer, diffbase, diff, first
//! sight), in Kopf's order: GONE, FREE, DELETE, CREATE, RESUME, NOOP, UPDATE; and Kopf's debug
//! lines about each cause, which Kopf's own tests look for.

use serde_json::{Value, json};

use super::diff::{DiffItem, DiffOp};
use crate::logs::{Level, Line};

/// The reason of a changing cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The object was seen for the first time without a diffbase.
    Create,
    /// The essence changed since it was last handled.
    Update,
    /// The object is being deleted and still holds our finalizer.
    Delete,
    /// First sight of an already handled, unchanged object by this process.
    Resume,
    /// Nothing to do.
    Noop,
    /// Being deleted and our finalizer is not on it: nothing to do, nothing to block.
    Free,
    /// The object is gone from the API server.
    Gone,
}

impl Reason {
    /// The word used in progress records' `purpose` and in Kopf's logs.
    pub fn purpose(self) -> &'static str {
        match self {
            Reason::Create => "create",
            Reason::Update => "update",
            Reason::Delete => "delete",
            Reason::Resume => "resume",
            Reason::Noop => "noop",
            Reason::Free => "free",
            Reason::Gone => "gone",
        }
    }

    /// The title in `<Title> is processed: ...` log lines.
    pub fn title(self) -> &'static str {
        match self {
            Reason::Create => "Creation",
            Reason::Update => "Updating",
            Reason::Delete => "Deletion",
            Reason::Resume => "Resuming",
            Reason::Noop => "Nothing",
            Reason::Free => "Freeing",
            Reason::Gone => "Disappearance",
        }
    }

    /// Whether handlers of this reason change the diffbase when they finish.
    pub fn stores_diffbase(self) -> bool {
        matches!(self, Reason::Create | Reason::Update | Reason::Resume)
    }

    /// Kopf's debug line about a cause no handler is called for: the object gone, deleted
    /// without our finalizer, or changed outside its essence.
    pub fn idle_line(self) -> Option<Line> {
        let text = match self {
            Reason::Gone => "Deleted, really deleted, and we are notified.",
            Reason::Free => "Deletion, but we are done with it, and we do not care.",
            Reason::Noop => "Something has changed, but we are not interested (the essence is the same).",
            _ => return None,
        };
        Some(Line::new(Level::Debug, text))
    }
}

/// Kopf's debug lines of every cycle of a cause that handlers are called for (creation,
/// updating, deletion, resuming): `{Title} is in progress: {body}` and, for an update with a
/// diff, `{Title} diff: {diff}`, the body and the diff as compact JSON (each diff item as
/// `[operation, [path…], old, new]`). The body's text costs: ask only when debug lines are
/// read.
pub fn progress_lines(reason: Reason, body: &Value, diff: &[DiffItem]) -> Vec<Line> {
    if !matches!(reason, Reason::Create | Reason::Update | Reason::Delete | Reason::Resume) {
        return Vec::new();
    }
    let title = reason.title();
    let mut lines = vec![Line::new(Level::Debug, format!("{title} is in progress: {body}"))];
    if reason == Reason::Update && !diff.is_empty() {
        let items: Vec<Value> = diff
            .iter()
            .map(|d| {
                let op = match d.op {
                    DiffOp::Add => "add",
                    DiffOp::Change => "change",
                    DiffOp::Remove => "remove",
                };
                json!([op, d.path, d.old, d.new])
            })
            .collect();
        lines.push(Line::new(Level::Debug, format!("{title} diff: {}", Value::Array(items))));
    }
    lines
}

/// What cause detection looks at.
#[derive(Debug, Clone, Copy, Default)]
pub struct Observation {
    /// The watch said DELETED.
    pub deleted_event: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deletion_requested: bool,
    /// Our finalizer is on the object.
    pub has_finalizer: bool,
    /// A diffbase is stored on the object.
    pub has_diffbase: bool,
    /// The essence differs from the stored diffbase.
    pub changed: bool,
    /// This process has not seen the object before.
    pub first_sight: bool,
}

/// Detects the cause of an observation.
pub fn detect(o: Observation) -> Reason {
    if o.deleted_event {
        Reason::Gone
    } else if o.deletion_requested && !o.has_finalizer {
        Reason::Free
    } else if o.deletion_requested {
        Reason::Delete
    } else if !o.has_diffbase {
        Reason::Create
    } else if !o.changed && o.first_sight {
        Reason::Resume
    } else if !o.changed {
        Reason::Noop
    } else {
        Reason::Update
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_crosses_event_deletion_finalizer_diffbase_and_sight() {
        // (deleted_event, deletion_requested, has_finalizer, has_diffbase, changed, first_sight) → reason
        let table = [
            ((true, false, false, false, false, false), Reason::Gone),
            ((true, true, true, true, true, true), Reason::Gone),
            ((false, true, false, false, false, false), Reason::Free),
            ((false, true, false, true, true, true), Reason::Free),
            ((false, true, true, false, false, false), Reason::Delete),
            ((false, true, true, true, true, true), Reason::Delete),
            ((false, false, false, false, false, false), Reason::Create),
            ((false, false, true, false, true, true), Reason::Create),
            ((false, false, false, true, false, true), Reason::Resume),
            ((false, false, true, true, false, true), Reason::Resume),
            ((false, false, false, true, false, false), Reason::Noop),
            ((false, false, false, true, true, false), Reason::Update),
            ((false, false, false, true, true, true), Reason::Update),
        ];
        for ((de, dr, hf, hd, ch, fs), want) in table {
            let o = Observation {
                deleted_event: de,
                deletion_requested: dr,
                has_finalizer: hf,
                has_diffbase: hd,
                changed: ch,
                first_sight: fs,
            };
            assert_eq!(detect(o), want, "{o:?}");
        }
    }

    #[test]
    fn each_cause_has_kopfs_debug_lines() {
        let body = json!({"metadata": {"name": "n"}, "spec": {"a": 2}});
        let changed = DiffItem { op: DiffOp::Change, path: vec!["spec".into(), "a".into()], old: Some(json!(1)), new: Some(json!(2)) };
        let added = DiffItem { op: DiffOp::Add, path: vec!["spec".into(), "b".into()], old: None, new: Some(json!("x")) };
        let diff = [changed, added];
        let progress = |title: &str| format!("{title} is in progress: {{\"metadata\":{{\"name\":\"n\"}},\"spec\":{{\"a\":2}}}}");
        // (reason, diff given) → the lines of its cycles, and its line when nothing is called
        type Row = (Reason, bool, Vec<String>, Option<&'static str>);
        let rows: Vec<Row> = vec![
            (Reason::Create, false, vec![progress("Creation")], None),
            (
                Reason::Update,
                true,
                vec![progress("Updating"), r#"Updating diff: [["change",["spec","a"],1,2],["add",["spec","b"],null,"x"]]"#.into()],
                None,
            ),
            (Reason::Update, false, vec![progress("Updating")], None),
            (Reason::Delete, true, vec![progress("Deletion")], None),
            (Reason::Resume, false, vec![progress("Resuming")], None),
            (Reason::Noop, false, vec![], Some("Something has changed, but we are not interested (the essence is the same).")),
            (Reason::Free, false, vec![], Some("Deletion, but we are done with it, and we do not care.")),
            (Reason::Gone, false, vec![], Some("Deleted, really deleted, and we are notified.")),
        ];
        for (reason, with_diff, want, idle) in rows {
            let lines = progress_lines(reason, &body, if with_diff { &diff } else { &[] });
            assert!(lines.iter().all(|l| l.level == Level::Debug), "{reason:?}");
            assert_eq!(lines.into_iter().map(|l| l.text).collect::<Vec<_>>(), want, "{reason:?}");
            assert_eq!(reason.idle_line().map(|l| l.text), idle.map(String::from), "{reason:?}");
        }
    }
}
