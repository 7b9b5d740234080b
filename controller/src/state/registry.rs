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
    BadOption(String, super::outcomes::BadSeconds),
    /// An admission handler names an operation the API server does not have.
    #[error("admission handler '{0}' names the operation {1:?}; use CREATE, UPDATE, DELETE or CONNECT")]
    BadOperation(String, String),
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
    /// Unique id.
    pub id: String,
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
            |v: Option<f64>, what: &'static str| super::outcomes::seconds(v, what).map_err(|why| Error::BadOption(spec.id.clone(), why));
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
                | (K::Resume, Reason::Resume | Reason::Delete)
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
pub fn build(described: &[Vec<pb::HandlerSpec>]) -> Result<Vec<Handler>, Error> {
    let mut out: Vec<Handler> = Vec::new();
    for (server, specs) in described.iter().enumerate() {
        for spec in specs {
            let h = Handler::from_spec(spec, server)?;
            // As in Kopf, one id may serve several causes (`@on.create` + `@on.update`); the
            // progress records of different causes never meet (their purpose differs).
            if out.iter().any(|o| o.id == h.id && o.kind == h.kind && o.resource == h.resource) {
                return Err(Error::DuplicateId(h.id));
            }
            out.push(h);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::diff::diff;
    use serde_json::json;

    fn spec(id: &str, kind: pb::HandlerKind) -> pb::HandlerSpec {
        pb::HandlerSpec {
            id: id.into(),
            kind: kind as i32,
            resource: Some(pb::ResourceSelector { group: "kopf.dev".into(), version: "v1".into(), name: "kopfexamples".into() }),
            ..Default::default()
        }
    }

    fn eq(v: Value) -> pb::ValueFilter {
        pb::ValueFilter { check: Some(pb::value_filter::Check::Equals(serde_json::to_vec(&v).unwrap())) }
    }
    fn present() -> pb::ValueFilter {
        pb::ValueFilter { check: Some(pb::value_filter::Check::Present(true)) }
    }
    fn absent() -> pb::ValueFilter {
        pb::ValueFilter { check: Some(pb::value_filter::Check::Absent(true)) }
    }

    #[test]
    fn build_rejects_bad_registrations_with_clear_errors() {
        let mut field = spec("f", pb::HandlerKind::Field);
        field.field = String::new();
        let mut nores = spec("n", pb::HandlerKind::Create);
        nores.resource = None;
        let cases = vec![
            (vec![vec![spec("a", pb::HandlerKind::Create)], vec![spec("a", pb::HandlerKind::Create)]], Err(Error::DuplicateId("a".into()))),
            (vec![vec![spec("a", pb::HandlerKind::Create), spec("a", pb::HandlerKind::Update)]], Ok(())),
            (vec![vec![spec("", pb::HandlerKind::Create)]], Err(Error::EmptyId(pb::HandlerKind::Create))),
            (vec![vec![spec("u", pb::HandlerKind::Unspecified)]], Err(Error::UnknownKind("u".into()))),
            (vec![vec![field]], Err(Error::NoField("f".into()))),
            (vec![vec![nores]], Err(Error::NoResource("n".into()))),
        ];
        for (described, want) in cases {
            assert_eq!(build(&described).map(|_| ()), want);
        }
        let ok = build(&[vec![spec("a", pb::HandlerKind::Create)], vec![spec("b", pb::HandlerKind::Delete)]]).unwrap();
        assert_eq!(ok.iter().map(|h| (h.id.as_str(), h.server)).collect::<Vec<_>>(), vec![("a", 0), ("b", 1)]);
    }

    #[test]
    fn admission_operations_are_checked_and_normalised() {
        let with = |ops: &[&str]| {
            let mut s = spec("v", pb::HandlerKind::Validate);
            s.admission = Some(pb::AdmissionOptions { operations: ops.iter().map(|o| o.to_string()).collect(), ..Default::default() });
            Handler::from_spec(&s, 0).map(|h| h.admission.operations)
        };
        type Case<'a> = (&'a [&'a str], Result<Vec<&'a str>, Error>);
        let cases: [Case; 5] = [
            (&[], Ok(vec![])),
            (&["create", " UPDATE ", "CREATE"], Ok(vec!["CREATE", "UPDATE"])),
            (&["CREATE", "*"], Ok(vec![])),
            (&["CONNECT", "DELETE"], Ok(vec!["CONNECT", "DELETE"])),
            (&["PATCH"], Err(Error::BadOperation("v".into(), "PATCH".into()))),
        ];
        for (ops, want) in cases {
            let want = want.map(|w| w.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(with(ops), want, "{ops:?}");
        }
    }

    #[test]
    fn object_filters_check_labels_annotations_and_field_values() {
        let mut s = spec("h", pb::HandlerKind::Create);
        let mut f = pb::Filters::default();
        f.labels.insert("app".into(), eq(json!("web")));
        f.labels.insert("skip".into(), absent());
        f.annotations.insert("note".into(), present());
        f.field = "spec.mode".into();
        f.value = Some(eq(json!("on")));
        s.filters = Some(f);
        let h = Handler::from_spec(&s, 0).unwrap();
        let body =
            |labels: Value, ann: Value, mode: Value| json!({"metadata": {"labels": labels, "annotations": ann}, "spec": {"mode": mode}});
        let cases = [
            (body(json!({"app": "web"}), json!({"note": ""}), json!("on")), true),
            (body(json!({"app": "db"}), json!({"note": ""}), json!("on")), false),
            (body(json!({"app": "web", "skip": "1"}), json!({"note": ""}), json!("on")), false),
            (body(json!({"app": "web"}), json!({}), json!("on")), false),
            (body(json!({"app": "web"}), json!({"note": "x"}), json!("off")), false),
            (body(json!({"app": "web"}), json!({"note": "x"}), Value::Null), false),
        ];
        for (b, want) in cases {
            assert_eq!(h.matches_object(&b), want, "{b}");
        }
    }

    #[test]
    fn due_selects_handlers_by_reason_field_and_old_new() {
        let mut field = spec("fld/spec.size", pb::HandlerKind::Field);
        field.field = "spec.size".into();
        let mut grow = spec("grow", pb::HandlerKind::Update);
        grow.field = "spec.size".into();
        grow.filters = Some(pb::Filters { new: Some(eq(json!(3))), ..Default::default() });
        let hs = build(&[vec![
            spec("c", pb::HandlerKind::Create),
            spec("u", pb::HandlerKind::Update),
            spec("d", pb::HandlerKind::Delete),
            spec("r", pb::HandlerKind::Resume),
            field,
            grow,
        ]])
        .unwrap();
        let old = json!({"spec": {"size": 1, "x": 1}});
        let size3 = json!({"spec": {"size": 3, "x": 1}});
        let x2 = json!({"spec": {"size": 1, "x": 2}});
        let due = |reason, old: Option<&Value>, new: &Value| -> Vec<String> {
            let d = diff(old, Some(new));
            hs.iter().filter(|h| h.due(reason, old, new, &d).is_some()).map(|h| h.id.clone()).collect()
        };
        assert_eq!(due(Reason::Create, None, &old), vec!["c", "fld/spec.size"]);
        assert_eq!(due(Reason::Create, None, &json!({"spec": {}})), vec!["c"]);
        assert_eq!(due(Reason::Update, Some(&old), &size3), vec!["u", "fld/spec.size", "grow"]);
        assert_eq!(due(Reason::Update, Some(&old), &x2), vec!["u"]);
        // Resume handlers fit deletions too; the plan keeps only those marked `deleted`.
        assert_eq!(due(Reason::Delete, Some(&old), &old), vec!["d", "r"]);
        assert_eq!(due(Reason::Resume, Some(&old), &old), vec!["r"]);
        assert!(due(Reason::Noop, Some(&old), &old).is_empty());
        let f = hs.iter().find(|h| h.id == "fld/spec.size").unwrap();
        let d = diff(Some(&old), Some(&size3));
        assert_eq!(f.due(Reason::Update, Some(&old), &size3, &d), Some((Some(json!(1)), Some(json!(3)))));
    }

    #[test]
    fn label_selectors_are_pushed_down_only_when_all_handlers_share_them() {
        let with = |id: &str, labels: Vec<(&str, pb::ValueFilter)>| {
            let mut s = spec(id, pb::HandlerKind::Create);
            let mut f = pb::Filters::default();
            for (k, v) in labels {
                f.labels.insert(k.into(), v);
            }
            s.filters = Some(f);
            Handler::from_spec(&s, 0).unwrap()
        };
        let a = with("a", vec![("app", eq(json!("web"))), ("tier", present()), ("skip", absent())]);
        let b = with("b", vec![("app", eq(json!("web"))), ("skip", absent())]);
        let c = with("c", vec![("app", eq(json!("db")))]);
        let n = with("n", vec![("num", eq(json!(5)))]);
        let none = with("x", vec![]);
        let cases: Vec<(Vec<&Handler>, Option<&str>)> = vec![
            (vec![&a], Some("app=web,!skip,tier")),
            (vec![&a, &b], Some("app=web,!skip")),
            (vec![&a, &c], None),
            (vec![&a, &none], None),
            (vec![&n], None),
            (vec![], None),
        ];
        for (hs, want) in cases {
            let got = common_label_selector(&hs);
            let ids: Vec<&str> = hs.iter().map(|h| h.id.as_str()).collect();
            assert_eq!(got.as_deref(), want, "{ids:?}");
        }
    }

    #[test]
    fn finalizer_is_required_by_blocking_delete_handlers_timers_and_daemons() {
        let mut optional = spec("o", pb::HandlerKind::Delete);
        optional.options = Some(pb::HandlerOptions { optional: true, ..Default::default() });
        let cases = [
            (spec("c", pb::HandlerKind::Create), false),
            (spec("d", pb::HandlerKind::Delete), true),
            (optional, false),
            (spec("t", pb::HandlerKind::Timer), true),
            (spec("m", pb::HandlerKind::Daemon), true),
        ];
        for (s, want) in cases {
            assert_eq!(Handler::from_spec(&s, 0).unwrap().requires_finalizer(), want, "{}", s.id);
        }
    }
}
