//! The plan's types: what it knows of the resource ([`Subject`]), how a cycle starts
//! ([`Start`]), the calls it makes ([`Invocation`], [`CallOutcome`]), the cycle itself
//! ([`Cycle`]) and what it writes and does next ([`Writes`], [`Next`]). Their behaviour is in
//! `plan.rs` and its other parts.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bosun_proto::v1 as pb;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::logs::Line;
use crate::state::causes::Reason;
use crate::state::diff::DiffItem;
use crate::state::essence::EssenceRules;
use crate::state::outcomes::Verdict;
use crate::state::progress::ProgressRecord;
use crate::state::registry::Handler;
use crate::state::storage::{ObjectState, Storage};
/// What the plan knows of the resource.
pub struct Subject<'a> {
    /// Its changing, timer and daemon handlers, in registration order.
    pub handlers: &'a [Arc<Handler>],
    /// Where state is kept.
    pub storage: &'a Storage,
    /// What the essence keeps.
    pub rules: &'a EssenceRules,
    /// The resource has a status subresource (status goes in a write of its own).
    pub has_status: bool,
    /// The status keeps unknown fields (results can live there).
    pub status_keeps_unknown: bool,
}

/// What the worker does after a cycle.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Nothing until the next event.
    Idle,
    /// Run again at once with the body the write returned (the finalizer was just added).
    Now,
    /// Run again at this time with the newest known body (delays, retries).
    WakeAt(DateTime<Utc>),
    /// Something outside the handlers failed (a handler server unreachable, the API server
    /// unavailable): run again after the object's throttling delay, or at this time if earlier.
    Throttled(Option<DateTime<Utc>>),
    /// The object is gone: the worker may end.
    Gone,
}

/// The writes of one cycle, in the order the runtime makes them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Writes {
    /// Merge patch of the main resource written before the status write: handlers' merge
    /// patches of it (and what goes with them), so that a success is recorded only once its
    /// patch landed (empty: no write).
    pub main: Value,
    /// Merge patch of the main resource written after the status write: the diffbase (it says
    /// the cause is handled, so the results must have landed first), and the controller's
    /// state when no handler patched the main resource (empty: no write).
    pub last: Value,
    /// Merge patch of the status subresource (empty: no write).
    pub status: Value,
    /// Add (`true`) or remove (`false`) the finalizer, in the main write.
    pub finalizer: Option<bool>,
    /// Handlers' JSON patches, by handler id.
    pub json_patches: Vec<(String, Value)>,
    /// Events to post about the object.
    pub events: Vec<pb::Event>,
}

impl Writes {
    /// Writes nothing (yet): empty main and status patches.
    pub fn none() -> Writes {
        Writes { main: json!({}), last: json!({}), status: json!({}), ..Default::default() }
    }
}

/// How a cycle starts.
#[derive(Debug)]
pub enum Start {
    /// Nothing to do for this body.
    Idle(Vec<Line>),
    /// Write only the finalizer; call the handlers once it is on the object (so a deletion
    /// that comes while the first handlers run still finds it).
    AddFinalizer(Box<Writes>, Vec<Line>),
    /// Call handlers.
    Handle(Box<Cycle>),
}

/// A handler due for the cause, with the values it receives.
#[derive(Debug, Clone)]
pub struct Due {
    /// The handler.
    pub handler: Arc<Handler>,
    /// The old value (of its field, or of the essence).
    pub old: Option<Value>,
    /// The new value.
    pub new: Option<Value>,
}

/// One call to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// Index of the due handler it belongs to.
    pub due: usize,
    /// The (sub-)handler id.
    pub id: String,
    /// For sub-handlers: the parent's id.
    pub parent: Option<String>,
    /// For sub-handlers: the parameter their parent gave.
    pub param: Option<Value>,
    /// The attempt number (0 for the first).
    pub retry: u32,
    /// When the first attempt started.
    pub started: DateTime<Utc>,
    /// Non-empty for the call that finishes a parent (its server finishes parents): the own
    /// ids of its sub-handlers, all finished (`HandleRequest.finished_subhandlers`).
    pub finishes: Vec<String>,
}

/// What one call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The (sub-)handler id.
    pub id: String,
    /// How it ended.
    pub verdict: Verdict,
    /// The result to store.
    pub result: Option<Value>,
    /// Its merge patch of the main resource.
    pub main_patch: Option<Value>,
    /// Its merge patch of the status (`{"status": …}`).
    pub status_patch: Option<Value>,
    /// Its JSON patch.
    pub json_patch: Option<Value>,
    /// Events to post.
    pub events: Vec<pb::Event>,
}

impl CallOutcome {
    /// Whether the call changes the object (so a refused write may be its fault).
    pub fn patches(&self) -> bool {
        self.main_patch.is_some() || self.status_patch.is_some() || self.json_patch.is_some()
    }
}

/// The state of one cycle, from the cause to the writes.
#[derive(Debug)]
pub struct Cycle {
    /// The cause.
    pub reason: Reason,
    /// The essence diff (updates).
    pub diff: Vec<DiffItem>,
    /// The cycle's clock.
    pub now: DateTime<Utc>,
    pub(super) due: Vec<Due>,
    pub(super) has_finalizer: bool,
    pub(super) wants_finalizer: bool,
    pub(super) stored: ObjectState,
    /// The stored diffbase says what the essence is now: kept as it is written, not rewritten.
    pub(super) stored_current: bool,
    pub(super) ids: Vec<String>,
    /// Sub-handler ids the records name beyond [`calls::MAX_RECORDS`] (not read).
    pub(super) unread: HashSet<String>,
    pub(super) new_essence: Value,
    pub(super) records: BTreeMap<String, ProgressRecord>,
    pub(super) attempted: HashSet<String>,
    /// Parents given their finishing call in this cycle.
    pub(super) finishing: HashSet<String>,
    /// A finishing call is due that this cycle may not make, or a handler's call waits for the
    /// outcome of the one that answered to be saved: the next cycle comes at once.
    pub(super) again: bool,
    /// The due handler (its index) that answered in this cycle, if one did: another due
    /// handler is called only by the next cycle, once that outcome is written (Kopf's order).
    pub(super) answered: Option<usize>,
    pub(super) skipped: HashSet<String>,
    pub(super) calls: Vec<CallOutcome>,
    /// Refused calls whose results a write of this cycle may have stored before the refusal.
    pub(super) retracted: Vec<String>,
    pub(super) wake: Option<DateTime<Utc>>,
    pub(super) unreachable: bool,
    pub(super) lines: Vec<Line>,
    /// Warning events about the stored state, posted with the cycle's writes.
    pub(super) notes: Vec<pb::Event>,
}
