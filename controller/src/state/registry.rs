//! The handlers the handler servers registered, and which of them apply to an object.
//!
//! Pure: built from `Describe` answers, matched against bodies and diffs without I/O.

use std::time::Duration;

use bosun_proto::v1 as pb;
use serde_json::Value;

use super::causes::Reason;
use super::diff::{DiffItem, touches};
use super::essence::{get_path, parse_path};
use crate::object;

/// A problem with what a handler server registered.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    /// Two handlers of the same kind and resource share an id.
    #[error("handler id '{0}' is registered twice for the same cause and resource; such ids must be unique across handler servers")]
    DuplicateId(String),
    /// The id is empty.
    #[error("a handler of kind {0:?} has an empty id")]
    EmptyId(pb::HandlerKind),
    /// The kind is not one this controller knows.
    #[error("handler '{0}' has an unknown or unspecified kind")]
    UnknownKind(String),
    /// A resource handler without a resource.
    #[error("handler '{0}' names no resource")]
    NoResource(String),
    /// A field handler without a field.
    #[error("field handler '{0}' names no field")]
    NoField(String),
    /// The id cannot be a key of the controller's state on objects.
    #[error("handler id '{0}' is not valid: {1}")]
    BadId(String, BadId),
    /// An option holds a value that is no duration.
    #[error("handler '{0}' has an invalid option: {1}")]
    BadOption(String, super::delays::BadSeconds),
    /// An admission handler names an operation the API server does not have.
    #[error("admission handler '{0}' names the operation {1:?}; use CREATE, UPDATE, DELETE or CONNECT")]
    BadOperation(String, String),
    /// One handler server gave two registrations the same key.
    #[error("handler key '{key}' is given to both '{first}' and '{second}' by one handler server; a server's keys must be unique")]
    DuplicateKey {
        /// The key.
        key: String,
        /// The id of the first registration with it.
        first: String,
        /// The id of the second.
        second: String,
    },
}

/// Why a string cannot be a handler id.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadId {
    /// Empty.
    #[error("it is empty")]
    Empty,
    /// A character a key does not allow.
    #[error("{0:?} is not allowed (use letters, digits, '-', '_', '.' and '/')")]
    Character(char),
    /// Begins or ends with a symbol.
    #[error("it must begin and end with a letter or digit")]
    Ends,
    /// `a//b`.
    #[error("it has an empty part between '/'")]
    EmptyPart,
}

/// Why `id` cannot name a (sub-)handler: its state is kept under an annotation key made from
/// it (`/` becomes `.`; long ones are cut and hashed), so it must be made of the characters
/// a key allows and begin and end with a letter or digit.
pub fn check_id(id: &str) -> Result<(), BadId> {
    if id.is_empty() {
        return Err(BadId::Empty);
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))) {
        return Err(BadId::Character(c));
    }
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !ends_ok(id.chars().next()) || !ends_ok(id.chars().last()) {
        return Err(BadId::Ends);
    }
    if id.split('/').any(str::is_empty) {
        return Err(BadId::EmptyPart);
    }
    Ok(())
}

/// How a handler's unexpected errors count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorsMode {
    /// Retried after the backoff.
    #[default]
    Temporary,
    /// Not retried.
    Permanent,
    /// Counted as success.
    Ignored,
}

/// A condition on a value (label, annotation, field).
#[derive(Debug, Clone, PartialEq)]
pub enum ValueCheck {
    /// Equal to this JSON value.
    Equals(Value),
    /// Present.
    Present,
    /// Absent.
    Absent,
}

impl ValueCheck {
    fn from_pb(v: &pb::ValueFilter) -> Option<ValueCheck> {
        match v.check.as_ref()? {
            pb::value_filter::Check::Equals(b) => serde_json::from_slice(b).ok().map(ValueCheck::Equals),
            pb::value_filter::Check::Present(true) => Some(ValueCheck::Present),
            pb::value_filter::Check::Absent(true) => Some(ValueCheck::Absent),
            _ => None,
        }
    }

    /// Whether `value` (None = absent) satisfies the check.
    pub fn matches(&self, value: Option<&Value>) -> bool {
        match self {
            ValueCheck::Equals(want) => value == Some(want),
            ValueCheck::Present => value.is_some(),
            ValueCheck::Absent => value.is_none(),
        }
    }
}

/// Filters of one handler, decoded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filters {
    /// Label conditions.
    pub labels: Vec<(String, ValueCheck)>,
    /// Annotation conditions.
    pub annotations: Vec<(String, ValueCheck)>,
    /// A field and the condition on its value.
    pub value: Option<(Vec<String>, ValueCheck)>,
    /// Condition on the old value of the handler's field (or essence).
    pub old: Option<ValueCheck>,
    /// Condition on the new value.
    pub new: Option<ValueCheck>,
}

/// One registered handler.
#[derive(Debug, Clone, PartialEq)]
pub struct Handler {
    /// The id its progress and result are recorded under (unique within a kind and resource).
    pub id: String,
    /// The server's own name for this registration (`HandlerSpec.key`), sent back as
    /// `handler_key` in every call of it and of its sub-handlers; empty when the server gave none.
    pub key: String,
    /// Its server finishes parents (`DescribeResponse.finishes_parents`): once its sub-handlers
    /// are finished, it is called once more to finish.
    pub finishes_parents: bool,
    /// What it reacts to.
    pub kind: pb::HandlerKind,
    /// Index of the handler server that serves it.
    pub server: usize,
    /// The resource as registered (resolved by the controller through discovery).
    pub resource: pb::ResourceSelector,
    /// For field handlers and field-restricted update handlers.
    pub field: Option<Vec<String>>,
    /// Filters.
    pub filters: Filters,
    /// Retry limit.
    pub retries: Option<u32>,
    /// Delay after unexpected errors.
    pub backoff: Duration,
    /// Give up this long after the first attempt.
    pub timeout: Option<Duration>,
    /// Deadline of one Handle call.
    pub call_timeout: Duration,
    /// What unexpected errors mean.
    pub errors: ErrorsMode,
    /// Delete handler that needs no finalizer.
    pub optional: bool,
    /// Resume handler that also runs for objects being deleted.
    pub deleted: bool,
    /// For timers: the schedule.
    pub timer: Timer,
    /// For daemons: their own delays.
    pub daemon: Daemon,
    /// For validating and mutating handlers: what they review.
    pub admission: Admission,
}

/// What a validating or mutating handler reviews, and how its failure counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// Operations reviewed (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`); empty means all.
    pub operations: Vec<String>,
    /// Subresources reviewed (`status`, `scale`); empty means the main resource only.
    pub subresources: Vec<String>,
    /// It has side effects: not called for dry runs (`sideEffects: NoneOnDryRun`).
    pub side_effects: bool,
    /// A failing, slow or unreachable handler denies the request (`failurePolicy: Fail`);
    /// otherwise the request passes without it (`Ignore`).
    pub fail_closed: bool,
}

/// The operations an admission webhook can review.
pub const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// A daemon's own delays (Kopf's `initial_delay`, `cancellation_timeout`, `backoff`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Daemon {
    /// Wait this long after the object is first seen before starting.
    pub initial_delay: Duration,
    /// After asking the daemon to stop, hold the finalizer at most this long for it to end.
    pub cancellation_timeout: Duration,
    /// Wait this long before restarting a daemon that failed temporarily.
    pub backoff: Duration,
}

impl Default for Daemon {
    fn default() -> Self {
        Daemon { initial_delay: Duration::ZERO, cancellation_timeout: Duration::ZERO, backoff: Duration::from_secs(60) }
    }
}

/// A timer's schedule (Kopf's `interval`, `idle`, `initial_delay`, `sharp`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timer {
    /// Time between calls.
    pub interval: Duration,
    /// Only call when the object has not changed for this long.
    pub idle: Duration,
    /// Wait this long after the object is first seen.
    pub initial_delay: Duration,
    /// Keep the schedule from the start of each call rather than its end.
    pub sharp: bool,
}

impl Handler {
    /// Decodes one registered handler from server number `server`.
    pub fn from_spec(spec: &pb::HandlerSpec, server: usize) -> Result<Handler, Error> {
        let kind = pb::HandlerKind::try_from(spec.kind).unwrap_or(pb::HandlerKind::Unspecified);
        if spec.id.is_empty() {
            return Err(Error::EmptyId(kind));
        }
        check_id(&spec.id).map_err(|why| Error::BadId(spec.id.clone(), why))?;
        if kind == pb::HandlerKind::Unspecified {
            return Err(Error::UnknownKind(spec.id.clone()));
        }
        let resource = spec.resource.clone().unwrap_or_default();
        if !is_activity(kind) && resource.name.is_empty() {
            return Err(Error::NoResource(spec.id.clone()));
        }
        let field = Some(parse_path(&spec.field)).filter(|f| !f.is_empty());
        if kind == pb::HandlerKind::Field && field.is_none() {
            return Err(Error::NoField(spec.id.clone()));
        }
        let f = spec.filters.clone().unwrap_or_default();
        let checks = |m: &std::collections::HashMap<String, pb::ValueFilter>| {
            let mut v: Vec<(String, ValueCheck)> = m.iter().filter_map(|(k, c)| ValueCheck::from_pb(c).map(|c| (k.clone(), c))).collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        let filters = Filters {
            labels: checks(&f.labels),
            annotations: checks(&f.annotations),
            value: f.value.as_ref().and_then(ValueCheck::from_pb).filter(|_| !f.field.is_empty()).map(|c| (parse_path(&f.field), c)),
            old: f.old.as_ref().and_then(ValueCheck::from_pb),
            new: f.new.as_ref().and_then(ValueCheck::from_pb),
        };
        let o = spec.options.unwrap_or_default();
        let secs =
            |v: Option<f64>, what: &'static str| super::delays::seconds(v, what).map_err(|why| Error::BadOption(spec.id.clone(), why));
        let timer = match spec.timer {
            None => Timer::default(),
            Some(t) => Timer {
                interval: secs(Some(t.interval_seconds), "timer.interval_seconds")?.unwrap_or_default().max(Duration::from_millis(10)),
                idle: secs(Some(t.idle_seconds), "timer.idle_seconds")?.unwrap_or_default(),
                initial_delay: secs(Some(t.initial_delay_seconds), "timer.initial_delay_seconds")?.unwrap_or_default(),
                sharp: t.sharp,
            },
        };
        let backoff = secs(o.backoff_seconds, "backoff_seconds")?.unwrap_or(Duration::from_secs(60));
        let daemon = match spec.daemon {
            None => Daemon { backoff, ..Daemon::default() },
            Some(d) => Daemon {
                initial_delay: secs(Some(d.initial_delay_seconds), "daemon.initial_delay_seconds")?.unwrap_or_default(),
                cancellation_timeout: secs(Some(d.cancellation_timeout_seconds), "daemon.cancellation_timeout_seconds")?
                    .unwrap_or_default(),
                // Unset (0) falls back to the handler's backoff.
                backoff: secs(Some(d.backoff_seconds), "daemon.backoff_seconds")?.filter(|d| !d.is_zero()).unwrap_or(backoff),
            },
        };
        let a = spec.admission.clone().unwrap_or_default();
        let mut operations: Vec<String> = Vec::new();
        for op in &a.operations {
            let op = op.trim().to_ascii_uppercase();
            if op != "*" && !OPERATIONS.contains(&op.as_str()) {
                return Err(Error::BadOperation(spec.id.clone(), op));
            }
            if !operations.contains(&op) {
                operations.push(op);
            }
        }
        // `*` among them means all, as no operation given does.
        if operations.iter().any(|o| o == "*") {
            operations.clear();
        }
        let admission =
            Admission { operations, subresources: a.subresources.clone(), side_effects: a.side_effects, fail_closed: a.fail_closed };
        Ok(Handler {
            id: spec.id.clone(),
            key: spec.key.clone(),
            finishes_parents: false,
            kind,
            server,
            resource,
            field,
            filters,
            retries: o.retries,
            backoff,
            timeout: secs(o.timeout_seconds, "timeout_seconds")?,
            call_timeout: secs(o.call_timeout_seconds, "call_timeout_seconds")?
                .unwrap_or(Duration::from_secs(300))
                .max(Duration::from_millis(1)),
            errors: match pb::ErrorsMode::try_from(o.errors).unwrap_or_default() {
                pb::ErrorsMode::Temporary => ErrorsMode::Temporary,
                pb::ErrorsMode::Permanent => ErrorsMode::Permanent,
                pb::ErrorsMode::Ignored => ErrorsMode::Ignored,
            },
            optional: o.optional,
            deleted: o.deleted,
            timer,
            daemon,
            admission,
        })
    }

    /// Whether it is an activity (startup, cleanup, probe): it has no resource.
    pub fn is_activity(&self) -> bool {
        is_activity(self.kind)
    }

    /// Whether it reviews admission requests (validate, mutate): its resource is not watched.
    pub fn is_admission(&self) -> bool {
        matches!(self.kind, pb::HandlerKind::Validate | pb::HandlerKind::Mutate)
    }

    /// Whether this handler makes the object need a finalizer.
    pub fn requires_finalizer(&self) -> bool {
        (self.kind == pb::HandlerKind::Delete && !self.optional) || matches!(self.kind, pb::HandlerKind::Timer | pb::HandlerKind::Daemon)
    }

    /// Whether the object's labels, annotations and field value satisfy the filters.
    pub fn matches_object(&self, body: &Value) -> bool {
        let meta = |what: &str, key: &str| object::meta(body, what).and_then(|m| m.get(key));
        self.filters.labels.iter().all(|(k, c)| c.matches(meta("labels", k)))
            && self.filters.annotations.iter().all(|(k, c)| c.matches(meta("annotations", k)))
            && self.filters.value.as_ref().is_none_or(|(path, c)| c.matches(get_path(body, path).filter(|v| !v.is_null())))
    }

    /// Whether the handler is due for `reason`, given the essences' diff, and if so the
    /// old/new values it receives.
    pub fn due(&self, reason: Reason, old: Option<&Value>, new: &Value, diff: &[DiffItem]) -> Option<(Option<Value>, Option<Value>)> {
        use pb::HandlerKind as K;
        let kind_fits = matches!(
            (self.kind, reason),
            (K::Create, Reason::Create)
                | (K::Update, Reason::Update)
                | (K::Delete, Reason::Delete)
                | (K::Resume, Reason::Resume | Reason::Update | Reason::Delete)
                | (K::Field, Reason::Create | Reason::Update)
        );
        if !kind_fits {
            return None;
        }
        let (o, n) = match &self.field {
            Some(field) => {
                let o = old.and_then(|v| get_path(v, field)).filter(|v| !v.is_null()).cloned();
                let n = get_path(new, field).filter(|v| !v.is_null()).cloned();
                if reason == Reason::Update && !touches(diff, field) {
                    return None;
                }
                if reason == Reason::Create && n.is_none() {
                    return None;
                }
                (o, n)
            }
            None => (old.cloned(), Some(new.clone())),
        };
        if matches!(reason, Reason::Update | Reason::Create) && self.field.is_some() || reason == Reason::Update {
            if !self.filters.old.as_ref().is_none_or(|c| c.matches(o.as_ref())) {
                return None;
            }
            if !self.filters.new.as_ref().is_none_or(|c| c.matches(n.as_ref())) {
                return None;
            }
        }
        Some((o, n))
    }
}

/// The label selector every handler of a resource agrees on, to be pushed to the API
/// server so that objects no handler can match are never sent to the controller. Only
/// conditions shared by all handlers qualify (a selector can only AND), and only string
/// equality, presence and absence can be expressed.
pub fn common_label_selector(handlers: &[&Handler]) -> Option<String> {
    let (first, rest) = handlers.split_first()?;
    let mut parts = Vec::new();
    for (key, check) in &first.filters.labels {
        if !rest.iter().all(|h| h.filters.labels.iter().any(|(k, c)| k == key && c == check)) {
            continue;
        }
        match check {
            ValueCheck::Equals(Value::String(v)) => parts.push(format!("{key}={v}")),
            ValueCheck::Present => parts.push(key.clone()),
            ValueCheck::Absent => parts.push(format!("!{key}")),
            ValueCheck::Equals(_) => {}
        }
    }
    if parts.is_empty() { None } else { Some(parts.join(",")) }
}

fn is_activity(kind: pb::HandlerKind) -> bool {
    matches!(kind, pb::HandlerKind::Startup | pb::HandlerKind::Cleanup | pb::HandlerKind::Probe)
}

/// Decodes every server's registry into one list, in server then registration order.
pub fn build(described: &[pb::DescribeResponse]) -> Result<Vec<Handler>, Error> {
    let mut out: Vec<Handler> = Vec::new();
    for (server, d) in described.iter().enumerate() {
        let first_of_server = out.len();
        for spec in &d.handlers {
            let mut h = Handler::from_spec(spec, server)?;
            h.finishes_parents = d.finishes_parents;
            // As in Kopf, one id may serve several causes (`@on.create` + `@on.update`); the
            // progress records of different causes never meet (their purpose differs).
            if out.iter().any(|o| o.id == h.id && o.kind == h.kind && o.resource == h.resource) {
                return Err(Error::DuplicateId(h.id));
            }
            // The key tells the server which of its registrations is called.
            if let Some(o) = out[first_of_server..].iter().find(|o| !h.key.is_empty() && o.key == h.key) {
                return Err(Error::DuplicateKey { key: h.key, first: o.id.clone(), second: h.id });
            }
            out.push(h);
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
