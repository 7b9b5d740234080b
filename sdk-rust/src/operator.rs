//! The [`Operator`] builder: Kopf's `@kopf.on.*` decorators, as chained method calls.
//!
//! Options (`.id()`, `.retries()`, filters…) apply to the handler registered last. Mistakes
//! (an option before any handler, an invalid selector, a duplicate id) are collected and
//! reported when the operator is served, never as panics.

use std::any::type_name;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use serde::Serialize;

use crate::cause::Cause;
use crate::error::HandlerError;
use crate::registry::{Error, ErrorsMode, Handler, HandlerFn, Parsed, Registry};
use crate::resource::Selector;

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
/// `create_fn_2`. Ids are stored on objects, so prefer an explicit `.id()` for anything
/// long-lived. Handlers with a field (`on_field`, or `.field()`) get `/<field>` appended, as in
/// Kopf: `field_fn/spec.field`.
#[derive(Default)]
pub struct Operator {
    pub(crate) handlers: Vec<Handler>,
    pub(crate) errors: Vec<Error>,
    pub(crate) server_name: Option<String>,
    pub(crate) ignored_fields: Vec<(Parsed, Vec<String>)>,
    pub(crate) owns: Vec<(Parsed, Vec<Parsed>)>,
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

    /// Declares the kinds a resource's handlers create as owned children (as
    /// controller-runtime's `Owns()`): the controller needs nothing of it to run, but
    /// `bosun rbac` grants `get`, `create` and `patch` on them.
    pub fn owns<'a>(mut self, resource: &str, kinds: impl IntoIterator<Item = &'a str>) -> Self {
        let kinds = kinds.into_iter().map(Selector::parse).collect();
        self.owns.push((Selector::parse(resource), kinds));
        self
    }

    pub(crate) fn register<F, Fut, T>(mut self, kind: pb::HandlerKind, resource: Option<&str>, field: Option<&str>, f: F) -> Self
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
        let func = wrap(f);
        self.handlers.push(Handler {
            id,
            kind,
            selector: resource.map(Selector::parse),
            field: field.map(String::from),
            filters: pb::Filters::default(),
            options: pb::HandlerOptions::default(),
            when: None,
            func,
            children: None,
            timer: None,
            admission: None,
            daemon: None,
        });
        self
    }

    /// Registers an index handler (Kopf's `@kopf.index`): called for every watch event of the
    /// objects of `resource`, its result is kept in this server's memory under the object and
    /// read by any handler with [`Cause::index`] under the handler's id (see [`Index`](crate::Index)
    /// for how results become keys). The controller calls no other handler before the first
    /// listing is indexed. Unexpected errors are ignored by default (the object keeps its stale
    /// values), as in Kopf.
    pub fn index<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Index, Some(resource), None, f).errors(ErrorsMode::Ignored)
    }

    /// Registers a creation handler (Kopf's `@kopf.on.create`).
    pub fn on_create<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Create, Some(resource), None, f)
    }

    /// Registers an update handler (Kopf's `@kopf.on.update`): `old`, `new` and `diff` are set.
    pub fn on_update<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Update, Some(resource), None, f)
    }

    /// Registers a deletion handler (Kopf's `@kopf.on.delete`); the controller adds a finalizer
    /// so that it runs before the object goes, unless `.optional()`.
    pub fn on_delete<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Delete, Some(resource), None, f)
    }

    /// Registers a resuming handler (Kopf's `@kopf.on.resume`): called for existing objects
    /// when the controller first sees them unchanged.
    pub fn on_resume<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Resume, Some(resource), None, f)
    }

    /// Registers a field handler (Kopf's `@kopf.on.field`): called when the value at the dotted
    /// path `field` changes; `old` and `new` are the field's values. Its id gets `/<field>`.
    pub fn on_field<F, Fut, T>(self, resource: &str, field: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Field, Some(resource), Some(field), f)
    }

    /// Registers a raw event handler (Kopf's `@kopf.on.event`, a "spy"): called for every watch
    /// event, including the initial listing; nothing is stored, failures are only logged.
    pub fn on_event<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Event, Some(resource), None, f)
    }

    /// Registers a timer (Kopf's `@kopf.timer`): called every `interval` for each object while
    /// it exists and matches (a finalizer keeps it until the timer is stopped). Refine it with
    /// `.idle()`, `.initial_delay()` and `.sharp()`.
    pub fn on_timer<F, Fut, T>(self, resource: &str, interval: Duration, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        let timer = pb::TimerOptions { interval_seconds: interval.as_secs_f64(), ..Default::default() };
        self.register(pb::HandlerKind::Timer, Some(resource), None, f).with("on_timer", |h| h.timer = Some(timer))
    }

    /// For timers: only call when the object has not changed for this long.
    pub fn idle(self, idle: Duration) -> Self {
        self.with("idle", |h| h.timer.get_or_insert_default().idle_seconds = idle.as_secs_f64())
    }

    /// For timers and daemons: wait this long after the object is first seen before the first
    /// call or the start.
    pub fn initial_delay(self, delay: Duration) -> Self {
        self.with("initial_delay", |h| match h.kind {
            pb::HandlerKind::Daemon => h.daemon.get_or_insert_default().initial_delay_seconds = delay.as_secs_f64(),
            _ => h.timer.get_or_insert_default().initial_delay_seconds = delay.as_secs_f64(),
        })
    }

    /// For timers: keep a strict schedule, however long each call takes.
    pub fn sharp(self) -> Self {
        self.with("sharp", |h| h.timer.get_or_insert_default().sharp = true)
    }

    /// Registers a startup activity (Kopf's `@kopf.on.startup`): run once when the controller
    /// starts; all must succeed before it watches anything. Its cause has no object.
    pub fn on_startup<F, Fut, T>(self, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Startup, None, None, f)
    }

    /// Registers a cleanup activity (Kopf's `@kopf.on.cleanup`): run once when the controller
    /// exits.
    pub fn on_cleanup<F, Fut, T>(self, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Cleanup, None, None, f)
    }

    /// Registers a probe (Kopf's `@kopf.on.probe`): run on each liveness check; its result is
    /// shown under its id in the liveness endpoint's JSON.
    pub fn on_probe<F, Fut, T>(self, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Probe, None, None, f)
    }

    /// Applies an option to the handler registered last, or records the mistake.
    pub(crate) fn with(mut self, option: &'static str, change: impl FnOnce(&mut Handler)) -> Self {
        match self.handlers.last_mut() {
            Some(handler) => change(handler),
            None => self.errors.push(Error::OptionWithoutHandler(option)),
        }
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

    /// Waits this long before retrying an unexpected error (default 60 s); for daemons, before
    /// restarting one that failed.
    pub fn backoff(self, backoff: Duration) -> Self {
        self.with("backoff", |h| {
            h.options.backoff_seconds = Some(backoff.as_secs_f64());
            if let Some(daemon) = &mut h.daemon {
                daemon.backoff_seconds = backoff.as_secs_f64();
            }
        })
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

    /// The function of the last handler's sub-handlers: the controller calls `parent/child`
    /// for each sub-handler the parent declared with [`Cause::subhandler`]; this function gets
    /// those calls, with [`Cause::subhandler_id`] and [`Cause::param`] set.
    pub fn subhandlers<F, Fut, T>(self, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        let children = wrap(f);
        self.with("subhandlers", |h| h.children = Some(children))
    }

    /// Validates the registrations and freezes them: the first mistake recorded while
    /// registering, else what the registry finds wrong.
    pub(crate) fn build(self) -> Result<Registry, Error> {
        if let Some(error) = self.errors.into_iter().next() {
            return Err(error);
        }
        Registry::new(self.server_name, self.handlers, self.ignored_fields, self.owns)
    }
}

/// Boxes a handler function, its result turned into JSON.
fn wrap<F, Fut, T>(f: F) -> HandlerFn
where
    F: Fn(Cause) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
    T: Serialize + 'static,
{
    Arc::new(move |cause| {
        let fut = f(cause);
        Box::pin(async move {
            let result = fut.await?;
            serde_json::to_value(result)
                .map_err(|e| HandlerError::unexpected(format!("the handler's result cannot be serialized to JSON: {e}")))
        })
    })
}

/// The name of a function item (`create_fn` for `my_crate::create_fn`); `None` for closures.
fn fn_name<F>() -> Option<&'static str> {
    let full = type_name::<F>();
    let last = full.rsplit("::").next().unwrap_or(full);
    let is_ident =
        !last.is_empty() && last.chars().all(|c| c.is_alphanumeric() || c == '_') && !last.starts_with(|c: char| c.is_ascii_digit());
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
        pb::HandlerKind::Index => "index",
        pb::HandlerKind::Unspecified => "handler",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Match;

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
            ["create_fn", "create_fn_2", "create_fn_3", "update_fn", "field_fn/spec.field", "other_fn/spec.other", "narrow_fn/spec.size",]
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
            (Operator::new().on_create(KEX, create_fn).idle(Duration::from_secs(1)), "only apply to timers"),
            (Operator::new().on_timer(KEX, Duration::ZERO, create_fn), "a timer's interval must be positive"),
            (Operator::new().on_create(KEX, create_fn).fail_closed(), "only apply to admission handlers"),
            (Operator::new().on_create(KEX, create_fn).cancellation_timeout(Duration::ZERO), "only applies to daemons"),
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
            .owns(KEX, ["v1/pods", "deployments.apps"])
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
        let owned: Vec<&str> = described.resources[0].owns.iter().map(|o| o.name.as_str()).collect();
        assert_eq!((described.resources.len(), owned), (1, vec!["pods", "deployments"]), "one entry per resource, with both settings");
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
