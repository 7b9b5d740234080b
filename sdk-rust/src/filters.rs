//! Filters of the handler registered last (Kopf's `labels=`, `annotations=`, `field=`,
//! `value=`, `old=`, `new=`, `when=`): equality, presence and absence travel to the controller
//! in `Describe`; predicates and callbacks stay here and are evaluated on each call.

use std::sync::Arc;

use bosun_proto::v1 as pb;

use crate::cause::Cause;
use crate::operator::Operator;
use crate::registry::{Match, WhenFn};

impl Operator {
    /// Only objects whose label `key` matches (`"value"`, `Match::Present`, `Match::Absent`).
    pub fn label(self, key: &str, condition: impl Into<Match>) -> Self {
        let (key, filter) = (key.to_string(), condition.into().to_proto());
        self.with("label", |h| {
            h.filters.labels.insert(key, filter);
        })
    }

    /// Only objects whose annotation `key` matches.
    pub fn annotation(self, key: &str, condition: impl Into<Match>) -> Self {
        let (key, filter) = (key.to_string(), condition.into().to_proto());
        self.with("annotation", |h| {
            h.filters.annotations.insert(key, filter);
        })
    }

    /// The dotted path that `.value()` checks; for update handlers also: only changes of this
    /// field (Kopf's `field=`). The id gets `/<field>` appended.
    pub fn field(self, path: &str) -> Self {
        let path = path.to_string();
        self.with("field", |h| {
            if h.kind == pb::HandlerKind::Update {
                h.field = Some(path.clone());
            }
            h.filters.field = path;
        })
    }

    /// Only objects whose `.field()` matches (Kopf's `value=`).
    pub fn value(self, condition: impl Into<Match>) -> Self {
        let filter = condition.into().to_proto();
        self.with("value", |h| h.filters.value = Some(filter))
    }

    /// For update and field handlers: only when the old value matches (Kopf's `old=`).
    pub fn old_value(self, condition: impl Into<Match>) -> Self {
        let filter = condition.into().to_proto();
        self.with("old_value", |h| h.filters.old = Some(filter))
    }

    /// For update and field handlers: only when the new value matches (Kopf's `new=`).
    pub fn new_value(self, condition: impl Into<Match>) -> Self {
        let filter = condition.into().to_proto();
        self.with("new_value", |h| h.filters.new = Some(filter))
    }

    /// Only when this predicate holds (Kopf's `when=`); evaluated by this server on each call:
    /// when it does not hold, the call is answered "skipped" and nothing is recorded. Several
    /// predicates (including those of `.label_when()` and `.annotation_when()`) must all hold.
    pub fn when(self, predicate: impl Fn(&Cause) -> bool + Send + Sync + 'static) -> Self {
        self.and_when("when", predicate)
    }

    /// Only objects whose label `key` satisfies this callback, given the label's value (`None`
    /// when absent) and the cause (Kopf's `labels={key: callback}`).
    pub fn label_when(self, key: &str, callback: impl Fn(Option<&str>, &Cause) -> bool + Send + Sync + 'static) -> Self {
        let key = key.to_string();
        self.and_when("label_when", move |cause| callback(cause.label(&key), cause))
    }

    /// Only objects whose annotation `key` satisfies this callback (Kopf's
    /// `annotations={key: callback}`).
    pub fn annotation_when(self, key: &str, callback: impl Fn(Option<&str>, &Cause) -> bool + Send + Sync + 'static) -> Self {
        let key = key.to_string();
        self.and_when("annotation_when", move |cause| callback(cause.annotation(&key), cause))
    }

    fn and_when(self, option: &'static str, predicate: impl Fn(&Cause) -> bool + Send + Sync + 'static) -> Self {
        self.with(option, |h| {
            let combined: WhenFn = match h.when.take() {
                None => Arc::new(predicate),
                Some(earlier) => Arc::new(move |cause: &Cause| earlier(cause) && predicate(cause)),
            };
            h.when = Some(combined);
        })
    }
}
