//! The registry of handlers and the [`Operator`] builder that fills it: Kopf's `@kopf.on.*`
//! decorators, as chained method calls.
//!
//! Options (`.id()`, `.retries()`, filters…) apply to the handler registered last. Mistakes
//! (an option before any handler, an invalid selector, a duplicate id) are collected and
//! reported when the operator is served, never as panics.

use std::any::type_name;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use serde::Serialize;
use serde_json::Value;

use crate::cause::Cause;
use crate::error::HandlerError;
use crate::resource::{self, Selector};

/// Why the registered handlers cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A handler option was set before any handler was registered.
    #[error("`.{0}()` was called before any handler was registered: options apply to the handler registered last")]
    OptionWithoutHandler(&'static str),
    /// A resource selector string is malformed.
    #[error(transparent)]
    InvalidSelector(#[from] resource::Error),
    /// Two handlers have the same id.
    #[error("two handlers have the id {0:?}: give one of them another `.id()`")]
    DuplicateId(String),
    /// An option does not fit the handler it was set on.
    #[error("handler {id:?}: {message}")]
    InvalidOption {
        /// The handler's id.
        id: String,
        /// What is wrong.
        message: String,
    },
    /// No handlers at all.
    #[error("no handlers are registered: add some with `.on_create(...)` and the like")]
    Empty,
}

/// What unexpected errors (neither temporary nor permanent) of a handler mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ErrorsMode {
    /// Retried after the backoff (Kopf's default).
    #[default]
    Temporary,
    /// Not retried.
    Permanent,
    /// Logged; the handler counts as succeeded.
    Ignored,
}

/// A condition on a label, an annotation or a field's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Match {
    /// The value equals this JSON value (a JSON string for labels and annotations).
    Equals(Value),
    /// The value is present (any value).
    Present,
    /// The value is absent.
    Absent,
}

impl From<&str> for Match {
    fn from(value: &str) -> Self {
        Match::Equals(Value::String(value.into()))
    }
}

impl From<String> for Match {
    fn from(value: String) -> Self {
        Match::Equals(Value::String(value))
    }
}

impl From<Value> for Match {
    fn from(value: Value) -> Self {
        Match::Equals(value)
    }
}

impl Match {
    fn to_proto(&self) -> pb::ValueFilter {
        use pb::value_filter::Check;
        let check = match self {
            Match::Equals(v) => Check::Equals(serde_json::to_vec(v).expect("JSON values always serialize")),
            Match::Present => Check::Present(true),
            Match::Absent => Check::Absent(true),
        };
        pb::ValueFilter { check: Some(check) }
    }
}

pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, HandlerError>> + Send>>;
pub(crate) type HandlerFn = Arc<dyn Fn(Cause) -> HandlerFuture + Send + Sync>;
pub(crate) type WhenFn = Arc<dyn Fn(&Cause) -> bool + Send + Sync>;

/// One registered handler.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) id: String,
    pub(crate) kind: pb::HandlerKind,
    selector: Result<Selector, resource::Error>,
    field: Option<String>,
    filters: pb::Filters,
    options: pb::HandlerOptions,
    pub(crate) when: Option<WhenFn>,
    pub(crate) func: HandlerFn,
}

impl Handler {
    fn spec(&self) -> pb::HandlerSpec {
        let selector = self.selector.as_ref().expect("validated when the registry was built");
        pb::HandlerSpec {
            id: self.id.clone(),
            kind: self.kind.into(),
            resource: Some(selector.to_proto()),
            filters: Some(pb::Filters { has_when: self.when.is_some(), ..self.filters.clone() }),
            options: Some(self.options),
            field: self.field.clone().unwrap_or_default(),
            timer: None,
            daemon: None,
            admission: None,
        }
    }
}

/// The validated handlers of a server, as served.
pub(crate) struct Registry {
    pub(crate) server_name: String,
    handlers: Vec<Handler>,
    by_id: HashMap<String, usize>,
    resources: Vec<pb::ResourceSettings>,
}

impl Registry {
    pub(crate) fn get(&self, id: &str) -> Option<&Handler> {
        self.by_id.get(id).map(|&i| &self.handlers[i])
    }

    pub(crate) fn ids(&self) -> impl Iterator<Item = &str> {
        self.handlers.iter().map(|h| h.id.as_str())
    }

    pub(crate) fn len(&self) -> usize {
        self.handlers.len()
    }

    pub(crate) fn describe(&self) -> pb::DescribeResponse {
        pb::DescribeResponse {
            handlers: self.handlers.iter().map(Handler::spec).collect(),
            server_name: self.server_name.clone(),
            resources: self.resources.clone(),
        }
    }
}

/// A handler server under construction: register handlers, set their options, then serve.
///
/// ```no_run
/// use bosun_sdk::{Cause, Operator};
///
/// async fn create_fn(cause: Cause) -> Result<serde_json::Value, bosun_sdk::HandlerError> {
///     cause.info(format!("Creating {}", cause.name()));
///     Ok(serde_json::json!({"message": "hello world"}))
/// }
///
/// # async fn run() -> Result<(), bosun_sdk::ServeError> {
/// Operator::new()
///     .on_create("kopf.dev/v1/kopfexamples", create_fn) // id: "create_fn"
///     .on_update("kopf.dev/v1/kopfexamples", |cause: Cause| async move {
///         cause.info("updated");
///         Ok(())
///     })
///     .id("update_fn")
///     .retries(3)
///     .serve_default()
///     .await
/// # }
/// ```
///
/// ## Handler ids
/// Like Kopf, a handler's id defaults to its function's name (`create_fn` above), taken from
/// [`std::any::type_name`]; closures have no name, so a closure registered as the n-th handler
/// of its kind is called `{kind}_fn` (n = 1) or `{kind}_fn_{n}`, for example `create_fn`,
/// `create_fn_2`. Ids are
/// stored on objects, so prefer an explicit `.id()` for anything long-lived. Handlers with a
/// field (`on_field`, or `.field()`) get `/<field>` appended, as in Kopf: `field_fn/spec.field`.
#[derive(Default)]
pub struct Operator {
    handlers: Vec<Handler>,
    errors: Vec<Error>,
    server_name: Option<String>,
    ignored_fields: Vec<(Result<Selector, resource::Error>, Vec<String>)>,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("handlers", &self.handlers.iter().map(|h| &h.id).collect::<Vec<_>>())
            .field("errors", &self.errors)
            .finish()
    }
}

impl Operator {
    /// An operator with no handlers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names this server in the controller's logs (default: the executable's name).
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Leaves these dotted paths out of change detection for a resource (for example
    /// `spec.replicas` when an autoscaler owns it).
    pub fn ignored_fields<'a>(mut self, resource: &str, paths: impl IntoIterator<Item = &'a str>) -> Self {
        let paths = paths.into_iter().map(String::from).collect();
        self.ignored_fields.push((Selector::parse(resource), paths));
        self
    }

    fn register<F, Fut, T>(mut self, kind: pb::HandlerKind, resource: &str, field: Option<&str>, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        let id = match fn_name::<F>() {
            Some(name) => name.to_string(),
            None => {
                let n = 1 + self.handlers.iter().filter(|h| h.kind == kind).count();
                let base = kind_name(kind);
                if n == 1 { format!("{base}_fn") } else { format!("{base}_fn_{n}") }
            }
        };
        let func: HandlerFn = Arc::new(move |cause| {
            let fut = f(cause);
            Box::pin(async move {
                let result = fut.await?;
                serde_json::to_value(result).map_err(|e| {
                    HandlerError::unexpected(format!("the handler's result cannot be serialized to JSON: {e}"))
                })
            })
        });
        self.handlers.push(Handler {
            id,
            kind,
            selector: Selector::parse(resource),
            field: field.map(String::from),
            filters: pb::Filters::default(),
            options: pb::HandlerOptions::default(),
            when: None,
            func,
        });
        self
    }

    /// Registers a creation handler (Kopf's `@kopf.on.create`).
    pub fn on_create<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Create, resource, None, f)
    }

    /// Registers an update handler (Kopf's `@kopf.on.update`): `old`, `new` and `diff` are set.
    pub fn on_update<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Update, resource, None, f)
    }

    /// Registers a deletion handler (Kopf's `@kopf.on.delete`); the controller adds a finalizer
    /// so that it runs before the object goes, unless `.optional()`.
    pub fn on_delete<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Delete, resource, None, f)
    }

    /// Registers a resuming handler (Kopf's `@kopf.on.resume`): called for existing objects
    /// when the controller first sees them unchanged.
    pub fn on_resume<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Resume, resource, None, f)
    }

    /// Registers a field handler (Kopf's `@kopf.on.field`): called when the value at the dotted
    /// path `field` changes; `old` and `new` are the field's values. Its id gets `/<field>`.
    pub fn on_field<F, Fut, T>(self, resource: &str, field: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Field, resource, Some(field), f)
    }

    /// Registers a raw event handler (Kopf's `@kopf.on.event`, a "spy"): called for every watch
    /// event, including the initial listing; nothing is stored, failures are only logged.
    pub fn on_event<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Event, resource, None, f)
    }

    fn last(&mut self, option: &'static str, change: impl FnOnce(&mut Handler)) -> &mut Self {
        match self.handlers.last_mut() {
            Some(handler) => change(handler),
            None => self.errors.push(Error::OptionWithoutHandler(option)),
        }
        self
    }

    fn with(mut self, option: &'static str, change: impl FnOnce(&mut Handler)) -> Self {
        self.last(option, change);
        self
    }

    /// Sets the last handler's id (instead of the function's name).
    pub fn id(self, id: impl Into<String>) -> Self {
        let id = id.into();
        self.with("id", |h| h.id = id)
    }

    /// Gives up after this many attempts.
    pub fn retries(self, retries: u32) -> Self {
        self.with("retries", |h| h.options.retries = Some(retries))
    }

    /// Waits this long before retrying an unexpected error (default 60 s).
    pub fn backoff(self, backoff: Duration) -> Self {
        self.with("backoff", |h| h.options.backoff_seconds = Some(backoff.as_secs_f64()))
    }

    /// Fails permanently when this much time passed since the first attempt.
    pub fn timeout(self, timeout: Duration) -> Self {
        self.with("timeout", |h| h.options.timeout_seconds = Some(timeout.as_secs_f64()))
    }

    /// The controller's deadline for one call of the handler (default 300 s).
    pub fn call_timeout(self, timeout: Duration) -> Self {
        self.with("call_timeout", |h| h.options.call_timeout_seconds = Some(timeout.as_secs_f64()))
    }

    /// What unexpected errors mean (default: temporary).
    pub fn errors(self, mode: ErrorsMode) -> Self {
        let mode = match mode {
            ErrorsMode::Temporary => pb::ErrorsMode::Temporary,
            ErrorsMode::Permanent => pb::ErrorsMode::Permanent,
            ErrorsMode::Ignored => pb::ErrorsMode::Ignored,
        };
        self.with("errors", |h| h.options.errors = mode.into())
    }

    /// For deletion handlers: no finalizer is added for this handler (best effort).
    pub fn optional(self) -> Self {
        self.with("optional", |h| h.options.optional = true)
    }

    /// For resuming handlers: also resume objects that are being deleted.
    pub fn deleted(self) -> Self {
        self.with("deleted", |h| h.options.deleted = true)
    }

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
    /// when it does not hold, the call is answered "skipped" and nothing is recorded.
    pub fn when(self, predicate: impl Fn(&Cause) -> bool + Send + Sync + 'static) -> Self {
        let predicate: WhenFn = Arc::new(predicate);
        self.with("when", |h| h.when = Some(predicate))
    }

    /// Validates the registrations and freezes them.
    pub(crate) fn build(self) -> Result<Registry, Error> {
        if let Some(error) = self.errors.into_iter().next() {
            return Err(error);
        }
        if self.handlers.is_empty() {
            return Err(Error::Empty);
        }
        let mut handlers = self.handlers;
        let mut by_id = HashMap::new();
        for (index, handler) in handlers.iter_mut().enumerate() {
            if let Err(e) = &handler.selector {
                return Err(e.clone().into());
            }
            let field = handler.field.as_deref().or(Some(handler.filters.field.as_str()).filter(|f| !f.is_empty()));
            if let Some(field) = field {
                handler.id = format!("{}/{field}", handler.id);
            }
            check_options(handler)?;
            if by_id.insert(handler.id.clone(), index).is_some() {
                return Err(Error::DuplicateId(handler.id.clone()));
            }
        }
        let mut resources = Vec::new();
        for (selector, paths) in self.ignored_fields {
            resources.push(pb::ResourceSettings { resource: Some(selector?.to_proto()), ignored_fields: paths });
        }
        let server_name = self.server_name.unwrap_or_else(default_server_name);
        Ok(Registry { server_name, handlers, by_id, resources })
    }
}

fn check_options(handler: &Handler) -> Result<(), Error> {
    let invalid = |message: &str| Err(Error::InvalidOption { id: handler.id.clone(), message: message.into() });
    let kind = handler.kind;
    if handler.id.is_empty() {
        return invalid("the id is empty");
    }
    if handler.options.optional && kind != pb::HandlerKind::Delete {
        return invalid("`.optional()` only applies to deletion handlers");
    }
    if handler.options.deleted && kind != pb::HandlerKind::Resume {
        return invalid("`.deleted()` only applies to resuming handlers");
    }
    if handler.filters.value.is_some() && handler.filters.field.is_empty() {
        return invalid("`.value()` needs a `.field()` to check");
    }
    let has_old_new = handler.filters.old.is_some() || handler.filters.new.is_some();
    if has_old_new && !matches!(kind, pb::HandlerKind::Update | pb::HandlerKind::Field) {
        return invalid("`.old_value()` and `.new_value()` only apply to update and field handlers");
    }
    Ok(())
}

/// The name of a function item (`create_fn` for `my_crate::create_fn`); `None` for closures.
fn fn_name<F>() -> Option<&'static str> {
    let full = type_name::<F>();
    let last = full.rsplit("::").next().unwrap_or(full);
    let is_ident = !last.is_empty()
        && last.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !last.starts_with(|c: char| c.is_ascii_digit());
    is_ident.then_some(last)
}

fn kind_name(kind: pb::HandlerKind) -> &'static str {
    match kind {
        pb::HandlerKind::Create => "create",
        pb::HandlerKind::Update => "update",
        pb::HandlerKind::Delete => "delete",
        pb::HandlerKind::Resume => "resume",
        pb::HandlerKind::Field => "field",
        pb::HandlerKind::Event => "event",
        pb::HandlerKind::Timer => "timer",
        pb::HandlerKind::Daemon => "daemon",
        pb::HandlerKind::Startup => "startup",
        pb::HandlerKind::Cleanup => "cleanup",
        pb::HandlerKind::Probe => "probe",
        pb::HandlerKind::Validate => "validate",
        pb::HandlerKind::Mutate => "mutate",
        pb::HandlerKind::Unspecified => "handler",
    }
}

fn default_server_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "bosun-sdk".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn create_fn(_: Cause) -> Result<(), HandlerError> {
        Ok(())
    }

    fn ids(operator: Operator) -> Vec<String> {
        operator.build().unwrap().ids().map(String::from).collect()
    }

    const KEX: &str = "kopf.dev/v1/kopfexamples";

    #[test]
    fn ids_default_to_function_names_and_numbered_kinds_for_closures() {
        let operator = Operator::new()
            .on_create(KEX, create_fn)
            .on_create(KEX, |_| async { Ok(()) })
            .on_create(KEX, |_| async { Ok(()) })
            .on_update(KEX, |_| async { Ok(()) })
            .on_field(KEX, "spec.field", |_| async { Ok(()) })
            .on_field(KEX, "spec.other", |_| async { Ok(()) })
            .id("other_fn")
            .on_update(KEX, |_| async { Ok(()) })
            .id("narrow_fn")
            .field("spec.size");
        assert_eq!(
            ids(operator),
            [
                "create_fn",
                "create_fn_2",
                "create_fn_3",
                "update_fn",
                "field_fn/spec.field",
                "other_fn/spec.other",
                "narrow_fn/spec.size",
            ]
        );
    }

    #[test]
    fn registration_mistakes_are_reported_when_building() {
        let table: Vec<(Operator, &str)> = vec![
            (Operator::new(), "no handlers are registered"),
            (Operator::new().id("x").on_create(KEX, create_fn), "`.id()` was called before any handler"),
            (Operator::new().on_create("a//b", create_fn), "invalid resource selector \"a//b\""),
            (
                Operator::new().on_create(KEX, create_fn).on_create(KEX, |_| async { Ok(()) }).id("create_fn"),
                "two handlers have the id \"create_fn\"",
            ),
            (Operator::new().on_create(KEX, create_fn).optional(), "`.optional()` only applies"),
            (Operator::new().on_create(KEX, create_fn).value("x"), "`.value()` needs a `.field()`"),
            (Operator::new().on_create(KEX, create_fn).old_value("x"), "only apply to update and field"),
        ];
        for (operator, expected) in table {
            let error = operator.build().err().expect(expected).to_string();
            assert!(error.contains(expected), "{error:?} should contain {expected:?}");
        }
    }

    #[test]
    fn describe_lists_handlers_with_filters_and_options_in_order() {
        let registry = Operator::new()
            .server_name("test")
            .on_create(KEX, create_fn)
            .retries(3)
            .backoff(Duration::from_millis(1500))
            .errors(ErrorsMode::Permanent)
            .label("somelabel", "somevalue")
            .annotation("skip", Match::Absent)
            .when(|cause| cause.name() != "x")
            .on_delete("kex", |_| async { Ok(()) })
            .optional()
            .ignored_fields(KEX, ["spec.replicas"])
            .build()
            .unwrap();
        let described = registry.describe();
        assert_eq!(described.server_name, "test");
        let [create, delete] = described.handlers.as_slice() else { panic!("{described:?}") };
        assert_eq!((create.id.as_str(), create.kind()), ("create_fn", pb::HandlerKind::Create));
        let selector = create.resource.as_ref().unwrap();
        assert_eq!((selector.group.as_str(), selector.version.as_str(), selector.name.as_str()), ("kopf.dev", "v1", "kopfexamples"));
        let options = create.options.as_ref().unwrap();
        assert_eq!((options.retries, options.backoff_seconds, options.errors()), (Some(3), Some(1.5), pb::ErrorsMode::Permanent));
        let filters = create.filters.as_ref().unwrap();
        assert!(filters.has_when);
        assert_eq!(filters.labels["somelabel"], Match::from("somevalue").to_proto());
        assert_eq!(filters.annotations["skip"], Match::Absent.to_proto());
        assert_eq!((delete.id.as_str(), delete.kind()), ("delete_fn", pb::HandlerKind::Delete));
        assert!(delete.options.as_ref().unwrap().optional);
        assert!(!delete.filters.as_ref().unwrap().has_when);
        assert_eq!(described.resources[0].ignored_fields, ["spec.replicas"]);
    }

    #[test]
    fn function_names_are_told_apart_from_closures() {
        let closure = |_: Cause| async { Ok::<(), HandlerError>(()) };
        assert_eq!(fn_name_of(create_fn), Some("create_fn"));
        assert_eq!(fn_name_of(closure), None);
    }

    fn fn_name_of<F>(_: F) -> Option<&'static str> {
        fn_name::<F>()
    }
}
