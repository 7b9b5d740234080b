//! The [`Cause`]: everything a handler gets (Kopf's keyword arguments: body, spec, meta,
//! status, old, new, diff, retry, started, runtime, param, memo…) and everything it sends back
//! besides its result (patch, log lines, events, memo).
//!
//! A `Cause` is cheap to clone; clones share the same patch, logs and events, so a handler may
//! hand clones to spawned tasks. What was recorded travels back even when the handler fails or
//! panics afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::index::{Index, Indices};
use crate::json;
use crate::live::Live;
use crate::outputs::Outputs;
use crate::patch::Patch;
use crate::stopped::Stopped;

/// Why a request could not be turned into a cause.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A JSON field of the request is not valid JSON.
    #[error("field `{field}` of the request is not valid JSON: {source}")]
    InvalidJson {
        /// The request's field.
        field: &'static str,
        /// The parser's complaint.
        #[source]
        source: serde_json::Error,
    },
}

/// Why a handler is called (`HandleRequest.reason`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Not given (for example a cause built by hand in a test).
    #[default]
    Unspecified,
    /// The object was seen for the first time without a diffbase.
    Create,
    /// The object's essence changed since it was last handled.
    Update,
    /// The object is being deleted.
    Delete,
    /// The object was seen for the first time by this controller process, unchanged.
    Resume,
    /// A raw watch event.
    Event,
    /// A timer tick.
    Timer,
    /// A watch event for an index.
    Index,
}

impl Resource {
    fn from_proto(resource: pb::Resource) -> Self {
        Resource {
            group: resource.group,
            version: resource.version,
            plural: resource.plural,
            kind: resource.kind,
            namespaced: resource.namespaced,
        }
    }
}

impl Reason {
    fn from_proto(value: i32) -> Self {
        match pb::Reason::try_from(value).unwrap_or(pb::Reason::Unspecified) {
            pb::Reason::Unspecified => Reason::Unspecified,
            pb::Reason::Create => Reason::Create,
            pb::Reason::Update => Reason::Update,
            pb::Reason::Delete => Reason::Delete,
            pb::Reason::Resume => Reason::Resume,
            pb::Reason::Event => Reason::Event,
            pb::Reason::Timer => Reason::Timer,
            pb::Reason::Index => Reason::Index,
        }
    }
}

/// The resource of the handled object, as resolved by the controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural name.
    pub plural: String,
    /// Kind.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

/// What happened at one path between the old and the new object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// The path was added.
    Add,
    /// The value at the path changed.
    Change,
    /// The path was removed.
    Remove,
}

/// One change between the old and the new essence (Kopf's diff items).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// What happened.
    pub operation: Operation,
    /// The path as a list of keys, for example `["spec", "size"]`.
    pub path: Vec<String>,
    /// The old value; `None` for additions.
    pub old: Option<Value>,
    /// The new value; `None` for removals.
    pub new: Option<Value>,
}

#[derive(Debug, Clone, Default)]
struct Data {
    handler_id: String,
    reason: Reason,
    resource: Resource,
    body: Value,
    old: Option<Value>,
    new: Option<Value>,
    diff: Vec<Change>,
    retry: u32,
    started: Option<DateTime<Utc>>,
    runtime: Duration,
    param: Option<Value>,
    memo: Option<Value>,
    event_type: Option<String>,
    subhandler: Option<String>,
    admission: Option<Value>,
}

/// One handler call: the object and why it is handled, plus the patch, logger and events that
/// travel back to the controller.
#[derive(Debug, Clone)]
pub struct Cause {
    data: Arc<Data>,
    pub(crate) patch: Arc<Mutex<Patch>>,
    pub(crate) outputs: Arc<Mutex<Outputs>>,
    /// For daemons: where records go at once, instead of `outputs`.
    pub(crate) live: Option<Live>,
    stopped: Stopped,
    /// The server's indices.
    indices: Indices,
}

static NULL: Value = Value::Null;

impl Cause {
    /// A cause for this object with nothing else set: for testing handler functions directly.
    /// Refine it with the `with_*` methods.
    pub fn from_body(body: Value) -> Self {
        Cause {
            data: Arc::new(Data { body, ..Data::default() }),
            patch: Arc::default(),
            outputs: Arc::default(),
            live: None,
            stopped: Stopped::default(),
            indices: Indices::default(),
        }
    }

    /// The index filled by the index handler `id` (Kopf's `**indices` kwargs); `None` when this
    /// server has no such index handler.
    pub fn index(&self, id: &str) -> Option<Index> {
        self.indices.get(id).cloned()
    }

    /// Gives the cause the server's indices.
    pub(crate) fn with_indices(mut self, indices: &Indices) -> Self {
        self.indices = indices.clone();
        self
    }

    /// Builds the cause of a `Handle` request.
    pub fn from_request(request: &pb::HandleRequest) -> Result<Self, Error> {
        let diff = request
            .diff
            .iter()
            .map(|item| {
                Ok(Change {
                    operation: match pb::diff_item::Operation::try_from(item.operation) {
                        Ok(pb::diff_item::Operation::Add) => Operation::Add,
                        Ok(pb::diff_item::Operation::Remove) => Operation::Remove,
                        _ => Operation::Change,
                    },
                    path: item.path.clone(),
                    old: json_opt("diff.old", &item.old)?,
                    new: json_opt("diff.new", &item.new)?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;

        let data = Data {
            handler_id: request.handler_id.clone(),
            reason: Reason::from_proto(request.reason),
            resource: request.resource.clone().map(Resource::from_proto).unwrap_or_default(),
            body: json_opt("object", &request.object)?.unwrap_or(Value::Null),
            old: json_opt("old", &request.old)?,
            new: json_opt("new", &request.new)?,
            diff,
            retry: request.retry,
            started: request.started.and_then(|t| DateTime::from_timestamp(t.seconds, t.nanos.clamp(0, 999_999_999) as u32)),
            runtime: request.runtime.and_then(|d| Duration::try_from(d).ok()).unwrap_or_default(),
            param: json_opt("param", &request.param)?,
            memo: json_opt("memo", &request.memo)?,
            event_type: Some(request.event_type.clone()).filter(|t| !t.is_empty()),
            subhandler: None,
            admission: None,
        };
        Ok(Cause { data: Arc::new(data), ..Cause::from_body(Value::Null) })
    }

    /// The cause of a daemon: its records stream through `live`; `stopped` says when to stop.
    pub(crate) fn from_daemon(request: &pb::DaemonRequest, live: Live, stopped: Stopped) -> Result<Self, Error> {
        let body = json_opt("object", &request.object)?.unwrap_or(Value::Null);
        let mut cause = Cause::from_body(body).with_handler_id(&request.handler_id).with_retry(request.retry);
        let data = cause.data_mut();
        data.resource = request.resource.clone().map(Resource::from_proto).unwrap_or_default();
        data.memo = json_opt("memo", &request.memo)?;
        Ok(Cause { live: Some(live), stopped, ..cause })
    }

    /// For daemons: whether (and when) the daemon is asked to stop (Kopf's `stopped`).
    pub fn stopped(&self) -> &Stopped {
        &self.stopped
    }

    fn data_mut(&mut self) -> &mut Data {
        Arc::make_mut(&mut self.data)
    }

    /// Sets the handler id (for tests).
    pub fn with_handler_id(mut self, id: impl Into<String>) -> Self {
        self.data_mut().handler_id = id.into();
        self
    }

    /// Sets the reason (for tests).
    pub fn with_reason(mut self, reason: Reason) -> Self {
        self.data_mut().reason = reason;
        self
    }

    /// Sets `old` and `new` (for tests).
    pub fn with_change(mut self, old: Value, new: Value) -> Self {
        let data = self.data_mut();
        data.old = Some(old);
        data.new = Some(new);
        self
    }

    /// Sets the retry number (for tests).
    pub fn with_retry(mut self, retry: u32) -> Self {
        self.data_mut().retry = retry;
        self
    }

    /// Marks the cause as a call of the sub-handler `child` of its handler (set its parameter
    /// with [`with_param`](Self::with_param)).
    pub fn with_subhandler(mut self, child: impl Into<String>) -> Self {
        self.data_mut().subhandler = Some(child.into());
        self
    }

    /// Sets the sub-handler parameter (for tests).
    pub fn with_param(mut self, param: Value) -> Self {
        self.data_mut().param = Some(param);
        self
    }

    /// The id of the handler being called (`parent/child` for sub-handlers).
    pub fn handler_id(&self) -> &str {
        &self.data.handler_id
    }

    /// Why the handler is called.
    pub fn reason(&self) -> Reason {
        self.data.reason
    }

    /// The object's resource.
    pub fn resource(&self) -> &Resource {
        &self.data.resource
    }

    /// The whole object, as the controller last saw it.
    pub fn body(&self) -> &Value {
        &self.data.body
    }

    /// The object deserialized into a type of yours (for example a `kube::CustomResource`).
    pub fn body_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&self.data.body)
    }

    /// `body.spec` (`Value::Null` when absent; indexing `Null` yields `Null`).
    pub fn spec(&self) -> &Value {
        self.body().get("spec").unwrap_or(&NULL)
    }

    /// `body.metadata`.
    pub fn meta(&self) -> &Value {
        self.body().get("metadata").unwrap_or(&NULL)
    }

    /// `body.status`.
    pub fn status(&self) -> &Value {
        self.body().get("status").unwrap_or(&NULL)
    }

    /// `metadata.name` (empty when absent).
    pub fn name(&self) -> &str {
        self.meta()["name"].as_str().unwrap_or_default()
    }

    /// `metadata.namespace`; `None` for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&str> {
        self.meta()["namespace"].as_str()
    }

    /// `metadata.uid` (empty when absent).
    pub fn uid(&self) -> &str {
        self.meta()["uid"].as_str().unwrap_or_default()
    }

    /// The object's labels.
    pub fn labels(&self) -> BTreeMap<&str, &str> {
        string_map(&self.meta()["labels"])
    }

    /// One label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.meta()["labels"].get(key).and_then(Value::as_str)
    }

    /// The object's annotations.
    pub fn annotations(&self) -> BTreeMap<&str, &str> {
        string_map(&self.meta()["annotations"])
    }

    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.meta()["annotations"].get(key).and_then(Value::as_str)
    }

    /// For update handlers the old essence; for field handlers the field's old value.
    pub fn old(&self) -> Option<&Value> {
        self.data.old.as_ref()
    }

    /// For update handlers the new essence; for field handlers the field's new value.
    #[allow(clippy::new_ret_no_self, clippy::wrong_self_convention)] // Kopf's name, paired with `old`
    pub fn new(&self) -> Option<&Value> {
        self.data.new.as_ref()
    }

    /// The changes between [`old`](Self::old) and [`new`](Self::new).
    pub fn diff(&self) -> &[Change] {
        &self.data.diff
    }

    /// How many attempts of this handler failed before this one (0 on the first).
    pub fn retry(&self) -> u32 {
        self.data.retry
    }

    /// When the first attempt of this handler for this cause started.
    pub fn started(&self) -> Option<DateTime<Utc>> {
        self.data.started
    }

    /// How long since [`started`](Self::started).
    pub fn runtime(&self) -> Duration {
        self.data.runtime
    }

    /// For sub-handlers: the parameter their parent gave them.
    pub fn param(&self) -> Option<&Value> {
        self.data.param.as_ref()
    }

    /// For admission handlers: the whole `request` of the AdmissionReview (operation, userInfo,
    /// dryRun, …); the object under review is the [`body`](Self::body), the old one [`old`](Self::old).
    pub fn admission_request(&self) -> Option<&Value> {
        self.data.admission.as_ref()
    }

    /// For admission handlers: whether the request is a dry run (`kubectl --dry-run=server`):
    /// a handler with side effects must not make them then (Kopf's `dryrun` kwarg).
    pub fn dry_run(&self) -> bool {
        self.admission_request().and_then(|r| r.get("dryRun")).and_then(Value::as_bool).unwrap_or(false)
    }

    /// The cause of an admission review: the object (for deletions, the old object) as the body.
    pub(crate) fn from_admission(handler_id: &str, request: Value) -> Self {
        let object = Some(&request["object"]).filter(|o| !o.is_null()).unwrap_or(&request["oldObject"]).clone();
        let old = Some(request["oldObject"].clone()).filter(|o| !o.is_null());
        let mut cause = Cause::from_body(object).with_handler_id(handler_id);
        let data = cause.data_mut();
        data.old = old;
        data.admission = Some(request);
        cause
    }

    /// For sub-handlers: the child's own id (`item1` of `create_fn/item1`).
    pub fn subhandler_id(&self) -> Option<&str> {
        self.data.subhandler.as_deref()
    }

    /// The memo this server returned for this object last time (within the controller's life).
    pub fn memo(&self) -> Option<&Value> {
        self.data.memo.as_ref()
    }

    /// For event handlers: `ADDED`, `MODIFIED` or `DELETED`; `None` for the initial listing.
    pub fn event_type(&self) -> Option<&str> {
        self.data.event_type.as_deref()
    }
}

fn json_opt(field: &'static str, bytes: &[u8]) -> Result<Option<Value>, Error> {
    json::decode_opt(bytes).map_err(|source| Error::InvalidJson { field, source })
}

fn string_map(value: &Value) -> BTreeMap<&str, &str> {
    value.as_object().map(|map| map.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn example() -> Value {
        json!({
            "apiVersion": "kopf.dev/v1",
            "kind": "KopfExample",
            "metadata": {
                "name": "kopf-example-1",
                "namespace": "default",
                "uid": "u-1",
                "labels": {"somelabel": "somevalue"},
                "annotations": {"someannotation": "somevalue"},
            },
            "spec": {"duration": "1m", "field": "value"},
        })
    }

    #[test]
    fn accessors_read_the_object_like_kopf_kwargs() {
        let cause = Cause::from_body(example());
        assert_eq!(cause.name(), "kopf-example-1");
        assert_eq!(cause.namespace(), Some("default"));
        assert_eq!(cause.uid(), "u-1");
        assert_eq!(cause.spec()["field"], "value");
        assert_eq!(cause.status(), &Value::Null);
        assert_eq!(cause.status()["anything"], Value::Null);
        assert_eq!(cause.labels(), BTreeMap::from([("somelabel", "somevalue")]));
        assert_eq!(cause.annotation("someannotation"), Some("somevalue"));
        assert_eq!(cause.label("missing"), None);
    }

    #[test]
    fn a_request_becomes_a_cause_with_every_field() {
        let request = pb::HandleRequest {
            handler_id: "field_fn/spec.field".into(),
            reason: pb::Reason::Update.into(),
            object: serde_json::to_vec(&example()).unwrap(),
            old: b"\"value\"".to_vec(),
            new: b"\"newvalue\"".to_vec(),
            diff: vec![pb::DiffItem {
                operation: pb::diff_item::Operation::Change.into(),
                path: vec!["spec".into(), "field".into()],
                old: b"\"value\"".to_vec(),
                new: b"\"newvalue\"".to_vec(),
            }],
            retry: 2,
            started: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: 0 }),
            runtime: Some(prost_types::Duration { seconds: 3, nanos: 500_000_000 }),
            param: b"{\"item\":\"item1\"}".to_vec(),
            event_type: String::new(),
            ..Default::default()
        };
        let cause = Cause::from_request(&request).unwrap();
        assert_eq!(cause.handler_id(), "field_fn/spec.field");
        assert_eq!(cause.reason(), Reason::Update);
        assert_eq!(cause.old(), Some(&json!("value")));
        assert_eq!(cause.new(), Some(&json!("newvalue")));
        assert_eq!(cause.diff()[0].operation, Operation::Change);
        assert_eq!(cause.diff()[0].path, ["spec", "field"]);
        assert_eq!(cause.retry(), 2);
        assert_eq!(cause.started().unwrap().timestamp(), 1_700_000_000);
        assert_eq!(cause.runtime(), Duration::from_millis(3500));
        assert_eq!(cause.param(), Some(&json!({"item": "item1"})));
        assert_eq!(cause.memo(), None);
        assert_eq!(cause.event_type(), None);
    }

    #[test]
    fn invalid_json_in_a_request_names_the_field() {
        let request = pb::HandleRequest { object: b"{not json".to_vec(), ..Default::default() };
        let error = Cause::from_request(&request).unwrap_err();
        assert!(error.to_string().starts_with("field `object` of the request is not valid JSON"), "{error}");
    }

    #[test]
    fn clones_share_what_travels_back() {
        let cause = Cause::from_body(example());
        let clone = cause.clone();
        clone.info("from a clone");
        clone.patch().status("x", 1);
        cause.warn_event("SomeReason", "Some message");
        cause.exception_event("SomeReason", "Some exception:", &"Exception text.");
        let mut response = pb::HandleResponse::default();
        cause.drain_into(&mut response);
        assert_eq!(response.logs[0].message, "from a clone");
        assert_eq!(serde_json::from_slice::<Value>(&response.merge_patch).unwrap(), json!({"status": {"x": 1}}));
        let events: Vec<_> = response.events.iter().map(|e| (e.r#type.as_str(), e.message.as_str())).collect();
        assert_eq!(events, [("Warning", "Some message"), ("Error", "Some exception: Exception text.")]);
    }
}
