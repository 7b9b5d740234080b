//! What a handler sends back besides its outcome and result: log lines, events, a memo,
//! sub-handlers to run and objects to own.
//! Recorded on the [`Cause`](crate::Cause) while the handler runs, and moved into the
//! `HandleResponse` when it ends, however it ends.

use bosun_proto::v1 as pb;
use serde_json::Value;

use crate::cause::Cause;
use crate::json;
use crate::patch::{Patch, PatchRef};

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

/// What a handler records while it runs.
impl Cause {
    /// The patch to apply to the object after this handler (Kopf's `patch`).
    pub fn patch(&self) -> PatchRef<'_> {
        PatchRef::new(&self.patch, self.live.as_ref())
    }

    /// Logs at debug level, in the controller's log under `[namespace/name]`.
    pub fn debug(&self, message: impl Into<String>) {
        self.log(Level::Debug, message.into());
    }

    /// Logs at info level.
    pub fn info(&self, message: impl Into<String>) {
        self.log(Level::Info, message.into());
    }

    /// For admission handlers: a warning the API server passes to the client, which
    /// `kubectl` prints as `Warning: …` (Kopf's `warnings` kwarg).
    pub fn admission_warning(&self, message: impl Into<String>) {
        self.outputs.lock().warnings.push(message.into());
    }

    /// Logs a warning.
    pub fn warn(&self, message: impl Into<String>) {
        self.log(Level::Warning, message.into());
    }

    /// Logs an error.
    pub fn error(&self, message: impl Into<String>) {
        self.log(Level::Error, message.into());
    }

    fn log(&self, level: Level, message: String) {
        tracing::debug!(handler = %self.handler_id(), object = %self.name(), "{message}");
        let record = LogRecord { level, message };
        match &self.live {
            Some(live) => live.log(record),
            None => self.outputs.lock().logs.push(record),
        }
    }

    /// Posts a Kubernetes event about the object (Kopf's `kopf.event`).
    pub fn event(&self, type_: impl Into<String>, reason: impl Into<String>, message: impl Into<String>) {
        let record = EventRecord { type_: type_.into(), reason: reason.into(), message: message.into() };
        match &self.live {
            Some(live) => live.event(record),
            None => self.outputs.lock().events.push(record),
        }
    }

    /// Posts a `Normal` event (Kopf's `kopf.info`).
    pub fn info_event(&self, reason: impl Into<String>, message: impl Into<String>) {
        self.event("Normal", reason, message);
    }

    /// Posts a `Warning` event (Kopf's `kopf.warn`).
    pub fn warn_event(&self, reason: impl Into<String>, message: impl Into<String>) {
        self.event("Warning", reason, message);
    }

    /// Posts an `Error` event with the error appended to the message (Kopf's `kopf.exception`).
    pub fn exception_event(&self, reason: impl Into<String>, message: impl Into<String>, error: &dyn std::fmt::Display) {
        self.event("Error", reason, format!("{} {error}", message.into()));
    }

    /// The patch accumulated so far.
    pub fn patched(&self) -> Patch {
        self.patch.lock().clone()
    }

    /// The log lines recorded so far.
    pub fn logs(&self) -> Vec<LogRecord> {
        self.outputs.lock().logs.clone()
    }

    /// The events recorded so far.
    pub fn events(&self) -> Vec<EventRecord> {
        self.outputs.lock().events.clone()
    }

    /// Moves what was recorded into a response, leaving the cause empty.
    pub(crate) fn drain_into(&self, response: &mut pb::HandleResponse) {
        let (merge_patch, json_patch) = std::mem::take(&mut *self.patch.lock()).encode();
        response.merge_patch = merge_patch;
        response.json_patch = json_patch;
        std::mem::take(&mut *self.outputs.lock()).fill(response);
    }

    /// Moves the log lines out, for activities (which send nothing else back).
    pub(crate) fn drain_logs(&self) -> Vec<pb::LogLine> {
        std::mem::take(&mut *self.outputs.lock()).into_log_lines()
    }
    /// Replaces the object's memo for the next calls.
    pub fn set_memo(&self, memo: Value) {
        self.outputs.lock().memo = Some(memo);
    }

    /// Asks the controller to run the sub-handler `id` of this handler with `param` (Kopf's
    /// `kopf.execute`/`@kopf.subhandler`): it is tracked, retried and reported like a handler
    /// with the id `parent/id`, and routed to the function given to
    /// [`Operator::subhandlers`](crate::Operator::subhandlers). The parent counts as finished
    /// when all its sub-handlers are. The controller keeps the declared sub-handlers and their
    /// parameters on the object and does not call the parent again for the same cause (unless
    /// its answer was lost, as with any at-least-once call), so declaring is the parent's job.
    pub fn subhandler(&self, id: impl Into<String>, param: Value) {
        self.outputs.lock().subhandlers.push(SubhandlerRecord { id: id.into(), param });
    }

    /// Asks the controller to create this object as a child of the handled one (Kopf's
    /// `kopf.adopt` plus a create): owner reference, the owner's namespace and labels, and a name
    /// derived from the owner's unless it has one.
    pub fn adopt(&self, object: Value) {
        self.outputs.lock().owned.push(OwnedRecord { object, apply: false });
    }

    /// Like [`adopt`](Self::adopt), with server-side apply: re-running the handler updates the
    /// child instead of failing because it exists.
    pub fn adopt_applied(&self, object: Value) {
        self.outputs.lock().owned.push(OwnedRecord { object, apply: true });
    }

    /// The sub-handlers requested so far.
    pub fn subhandlers(&self) -> Vec<SubhandlerRecord> {
        self.outputs.lock().subhandlers.clone()
    }

    /// The objects to own requested so far.
    pub fn owned(&self) -> Vec<OwnedRecord> {
        self.outputs.lock().owned.clone()
    }
}
