//! What a handler sends back besides its outcome and result: log lines, events, a memo,
//! sub-handlers to run and objects to own.
//! Recorded on the [`Cause`](crate::Cause) while the handler runs (its methods for that are in
//! `recording.rs`), and moved into the `HandleResponse` when it ends, however it ends.

use bosun_proto::v1 as pb;
use serde_json::Value;

use crate::json;

/// Severity of a log line sent back to the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Debug detail (shown by the controller with `-v`).
    Debug,
    /// Information.
    Info,
    /// A warning.
    Warning,
    /// An error.
    Error,
}

/// A log line recorded by a handler; the controller prefixes it with `[namespace/name]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Severity.
    pub level: Level,
    /// The text.
    pub message: String,
}

/// A Kubernetes event about the handled object, posted by the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// `Normal`, `Warning`, or anything else (Kopf allows any type).
    pub type_: String,
    /// A short CamelCase reason.
    pub reason: String,
    /// The message; the controller cuts it to 1024 characters.
    pub message: String,
}

/// A sub-handler the handler asked for: the controller tracks it like a handler and calls
/// `parent/id` with `param`.
#[derive(Debug, Clone, PartialEq)]
pub struct SubhandlerRecord {
    /// The child's id, unique within its parent.
    pub id: String,
    /// What the child gets as [`Cause::param`](crate::Cause::param).
    pub param: Value,
}

/// An object the handler asked the controller to create and adopt as a child.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedRecord {
    /// The object.
    pub object: Value,
    /// Server-side apply instead of a plain create.
    pub apply: bool,
}

/// What the handler sends back besides its result and outcome.
#[derive(Debug, Default)]
pub(crate) struct Outputs {
    pub(crate) logs: Vec<LogRecord>,
    pub(crate) events: Vec<EventRecord>,
    pub(crate) memo: Option<Value>,
    pub(crate) subhandlers: Vec<SubhandlerRecord>,
    pub(crate) owned: Vec<OwnedRecord>,
    /// For admission handlers: warnings shown to the client (`kubectl` prints them).
    pub(crate) warnings: Vec<String>,
}

impl Outputs {
    /// The log lines, for answers that carry nothing else (activities).
    pub(crate) fn into_log_lines(self) -> Vec<pb::LogLine> {
        self.logs.into_iter().map(LogRecord::into_proto).collect()
    }

    /// Moves everything into a response.
    pub(crate) fn fill(self, response: &mut pb::HandleResponse) {
        response.logs = self.logs.into_iter().map(LogRecord::into_proto).collect();
        response.events = self.events.into_iter().map(EventRecord::into_proto).collect();
        if let Some(memo) = self.memo {
            response.memo = json::encode(&memo);
        }
        response.subhandlers =
            self.subhandlers.into_iter().map(|s| pb::SubHandler { id: s.id, param: json::encode(&s.param), options: None }).collect();
        response.owned = self
            .owned
            .into_iter()
            // Like Kopf's `adopt`: the child also gets the owner's labels.
            .map(|o| pb::OwnedObject { object: json::encode(&o.object), apply: o.apply, copy_labels: true })
            .collect();
    }
}

impl LogRecord {
    pub(crate) fn into_proto(self) -> pb::LogLine {
        let level = match self.level {
            Level::Debug => pb::log_line::Level::Debug,
            Level::Info => pb::log_line::Level::Info,
            Level::Warning => pb::log_line::Level::Warning,
            Level::Error => pb::log_line::Level::Error,
        };
        pb::LogLine { level: level.into(), message: self.message }
    }
}

impl EventRecord {
    pub(crate) fn into_proto(self) -> pb::Event {
        pb::Event { r#type: self.type_, reason: self.reason, message: self.message, regarding: None }
    }
}
