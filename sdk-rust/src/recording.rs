//! What a handler records while it runs: the [`Cause`](crate::Cause) methods that patch the
//! object, log, post events, set the memo, ask for sub-handlers and adopt children. A daemon's
//! records go to the controller at once (`live.rs`); the others are kept in the cause's
//! `Outputs` (`outputs.rs`) and patch (`patch.rs`) until the handler ends.

use bosun_proto::v1 as pb;
use serde_json::Value;

use crate::cause::Cause;
use crate::outputs::{EventRecord, Level, LogRecord, OwnedRecord, SubhandlerRecord};
use crate::patch::{Patch, PatchRef};

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
