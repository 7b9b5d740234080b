//! The registry of handlers as served: what one handler is (kind, selector, filters, options,
//! function), the validation of all of them together, and the `Describe` answer.
//!
//! The [`Operator`](crate::Operator) builder fills it; its mistakes are reported here, when the
//! operator is served, never as panics.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bosun_proto::v1 as pb;
use serde_json::Value;

use crate::cause::Cause;
use crate::error::HandlerError;
use crate::json;
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
    pub(crate) fn to_proto(&self) -> pb::ValueFilter {
        use pb::value_filter::Check;
        let check = match self {
            Match::Equals(v) => Check::Equals(json::encode(v)),
            Match::Present => Check::Present(true),
            Match::Absent => Check::Absent(true),
        };
        pb::ValueFilter { check: Some(check) }
    }
}

/// A resource as the application named it: parsed, or why not (reported when the registry is
/// built).
pub(crate) type Parsed = Result<Selector, resource::Error>;

pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, HandlerError>> + Send>>;
pub(crate) type HandlerFn = Arc<dyn Fn(Cause) -> HandlerFuture + Send + Sync>;
pub(crate) type WhenFn = Arc<dyn Fn(&Cause) -> bool + Send + Sync>;

/// One registered handler.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) id: String,
    pub(crate) kind: pb::HandlerKind,
    /// `None` for activities (startup, cleanup, probe), which have no resource.
    pub(crate) selector: Option<Parsed>,
    /// `HandlerSpec.field`: for field handlers, and update handlers narrowed by `.field()`.
    pub(crate) field: Option<String>,
    pub(crate) filters: pb::Filters,
    pub(crate) options: pb::HandlerOptions,
    pub(crate) when: Option<WhenFn>,
    pub(crate) func: HandlerFn,
    /// The function of its sub-handlers, if it declares any.
    pub(crate) children: Option<HandlerFn>,
    /// For timers: their schedule.
    pub(crate) timer: Option<pb::TimerOptions>,
    /// For admission handlers: what they review.
    pub(crate) admission: Option<pb::AdmissionOptions>,
    /// For daemons: their options.
    pub(crate) daemon: Option<pb::DaemonOptions>,
}

/// Whether a kind reviews admission requests, called through `Admit`.
pub(crate) fn is_admission(kind: pb::HandlerKind) -> bool {
    matches!(kind, pb::HandlerKind::Validate | pb::HandlerKind::Mutate)
}

/// Whether a kind is an operator-level activity, called through `Activity`, not `Handle`.
pub(crate) fn is_activity(kind: pb::HandlerKind) -> bool {
    matches!(kind, pb::HandlerKind::Startup | pb::HandlerKind::Cleanup | pb::HandlerKind::Probe)
}

impl Handler {
    fn spec(&self) -> pb::HandlerSpec {
        let selector = self.selector.as_ref().map(|s| s.as_ref().expect("validated when the registry was built"));
        pb::HandlerSpec {
            id: self.id.clone(),
            kind: self.kind.into(),
            resource: selector.map(Selector::to_proto),
            filters: Some(pb::Filters { has_when: self.when.is_some(), ..self.filters.clone() }),
            options: Some(self.options),
            field: self.field.clone().unwrap_or_default(),
            timer: self.timer,
            daemon: self.daemon,
            admission: self.admission.clone(),
            key: String::new(),
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
    /// The handler of a called id, and the sub-handler's own id when the call is for one: the
    /// id itself, else the longest registered id followed by `/` (ids may contain `/`, like
    /// `field_fn/spec.field`, so `field_fn/spec.field/item1` is that handler's `item1`).
    pub(crate) fn route<'a>(&self, id: &'a str) -> Option<(&Handler, Option<&'a str>)> {
        if let Some(&i) = self.by_id.get(id) {
            return Some((&self.handlers[i], None));
        }
        let mut cut = id.len();
        while let Some(slash) = id[..cut].rfind('/') {
            if let Some(&i) = self.by_id.get(&id[..slash]) {
                return Some((&self.handlers[i], Some(&id[slash + 1..])));
            }
            cut = slash;
        }
        None
    }

    /// The ids of handlers called through `Handle`.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &str> {
        self.handlers.iter().filter(|h| !is_activity(h.kind)).map(|h| h.id.as_str())
    }

    /// The ids of activities, called through `Activity`.
    pub(crate) fn activity_ids(&self) -> impl Iterator<Item = &str> {
        self.handlers.iter().filter(|h| is_activity(h.kind)).map(|h| h.id.as_str())
    }

    pub(crate) fn len(&self) -> usize {
        self.handlers.len()
    }

    /// Every handler, in registration order.
    pub(crate) fn handlers(&self) -> impl Iterator<Item = &Handler> {
        self.handlers.iter()
    }

    pub(crate) fn describe(&self) -> pb::DescribeResponse {
        pb::DescribeResponse {
            handlers: self.handlers.iter().map(Handler::spec).collect(),
            server_name: self.server_name.clone(),
            resources: self.resources.clone(),
            finishes_parents: false,
            settings: None,
            handle_stream: false,
        }
    }
}

impl Registry {
    /// Validates the handlers and resource settings an operator registered (see
    /// `Operator::build`), and freezes them; `None` names the server after the executable.
    pub(crate) fn new(
        server_name: Option<String>,
        mut handlers: Vec<Handler>,
        ignored_fields: Vec<(Parsed, Vec<String>)>,
        owns: Vec<(Parsed, Vec<Parsed>)>,
    ) -> Result<Registry, Error> {
        if handlers.is_empty() {
            return Err(Error::Empty);
        }
        let mut by_id = HashMap::new();
        for (index, handler) in handlers.iter_mut().enumerate() {
            if let Some(Err(e)) = &handler.selector {
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
        // One entry per resource, whichever settings name it.
        let mut resources: Vec<pb::ResourceSettings> = Vec::new();
        for (selector, paths) in ignored_fields {
            settings_of(&mut resources, selector?.to_proto()).ignored_fields.extend(paths);
        }
        for (selector, kinds) in owns {
            let kinds = kinds.into_iter().map(|k| k.map(|k| k.to_proto())).collect::<Result<Vec<_>, _>>()?;
            settings_of(&mut resources, selector?.to_proto()).owns.extend(kinds);
        }
        let server_name = server_name.unwrap_or_else(default_server_name);
        Ok(Registry { server_name, handlers, by_id, resources })
    }
}

/// The settings of `resource` among `all`, added when missing.
fn settings_of(all: &mut Vec<pb::ResourceSettings>, resource: pb::ResourceSelector) -> &mut pb::ResourceSettings {
    let at = match all.iter().position(|r| r.resource.as_ref() == Some(&resource)) {
        Some(at) => at,
        None => {
            all.push(pb::ResourceSettings { resource: Some(resource), ..Default::default() });
            all.len() - 1
        }
    };
    &mut all[at]
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
    match (kind, handler.timer) {
        (pb::HandlerKind::Timer, Some(timer)) if timer.interval_seconds > 0.0 => {}
        (pb::HandlerKind::Timer, _) => return invalid("a timer's interval must be positive"),
        (_, Some(_)) => return invalid("`.idle()`, `.initial_delay()` and `.sharp()` only apply to timers"),
        (_, None) => {}
    }
    if handler.daemon.is_some() && kind != pb::HandlerKind::Daemon {
        return invalid("`.cancellation_timeout()` only applies to daemons");
    }
    if handler.admission.is_some() && !is_admission(kind) {
        return invalid("`.operations()`, `.subresources()`, `.side_effects()` and `.fail_closed()` only apply to admission handlers");
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

fn default_server_name() -> String {
    std::env::current_exe().ok().and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned())).unwrap_or_else(|| "bosun-sdk".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Operator;

    #[test]
    fn calls_route_to_the_handler_or_to_the_longest_registered_parent() {
        let noop = |_: Cause| async { Ok(()) };
        let registry =
            Operator::new().on_create("kex", noop).id("create_fn").on_field("kex", "spec.field", noop).id("create_fn").build().unwrap();
        let table = [
            ("create_fn", Some(("create_fn", None))),
            ("create_fn/spec.field", Some(("create_fn/spec.field", None))),
            ("create_fn/item1", Some(("create_fn", Some("item1")))),
            ("create_fn/spec.field/item1", Some(("create_fn/spec.field", Some("item1")))),
            ("create_fn/a/b", Some(("create_fn", Some("a/b")))),
            ("other", None),
            ("other/item1", None),
        ];
        for (id, expected) in table {
            let routed = registry.route(id).map(|(h, child)| (h.id.as_str(), child));
            assert_eq!(routed, expected, "{id}");
        }
    }
}
