//! The object type the watch and the lists deserialise into: the whole body as JSON, parsed
//! once. kube's `DynamicObject` parses `metadata` into the typed `ObjectMeta` — every
//! timestamp and managedFields entry — and the runtime then had to serialise it back into
//! JSON: a round trip per event that cost more than the rest of the watch path. The watcher
//! needs only a resource's `ObjectMeta` for its bookkeeping (name, namespace, uid,
//! resourceVersion), so those few fields are copied beside the body.

use std::borrow::Cow;

use crate::object;
use kube::api::{ApiResource, ObjectMeta};
use kube::core::{DynamicResourceScope, Resource};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// An object of any resource: its body, and the metadata fields kube's watcher reads.
#[derive(Debug, Clone, PartialEq)]
pub struct RawObject {
    /// Only `name`, `namespace`, `uid` and `resourceVersion` are filled; the body has it all.
    meta: ObjectMeta,
    body: Value,
}

impl RawObject {
    /// Wraps a body.
    pub fn new(body: Value) -> RawObject {
        let field = |k: &str| object::meta(&body, k).and_then(Value::as_str).map(String::from);
        let meta = ObjectMeta {
            name: field("name"),
            namespace: field("namespace"),
            uid: field("uid"),
            resource_version: field("resourceVersion"),
            ..ObjectMeta::default()
        };
        RawObject { meta, body }
    }

    /// The body.
    pub fn body(&self) -> &Value {
        &self.body
    }

    /// The body, taken.
    pub fn into_body(self) -> Value {
        self.body
    }

    /// The copied metadata fields and the body, taken.
    pub fn into_parts(self) -> (ObjectMeta, Value) {
        (self.meta, self.body)
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawObject, D::Error> {
        Value::deserialize(d).map(usual_order).map(RawObject::new)
    }
}

/// The body with `apiVersion` and `kind` first, as a real API server sends custom resources
/// (their keys sorted) and as handlers and logs show objects; other servers (the dev cluster,
/// built-in kinds) send `kind` first. Only the top-level entries move.
fn usual_order(body: Value) -> Value {
    let Value::Object(map) = body else { return body };
    if map.keys().next().is_none_or(|k| k == "apiVersion") {
        return Value::Object(map);
    }
    let mut out = serde_json::Map::with_capacity(map.len());
    let mut rest = Vec::with_capacity(map.len());
    let (mut api_version, mut kind) = (None, None);
    for (k, v) in map {
        match k.as_str() {
            "apiVersion" => api_version = Some(v),
            "kind" => kind = Some(v),
            _ => rest.push((k, v)),
        }
    }
    out.extend(api_version.map(|v| ("apiVersion".to_string(), v)));
    out.extend(kind.map(|v| ("kind".to_string(), v)));
    out.extend(rest);
    Value::Object(out)
}

impl Serialize for RawObject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.body.serialize(s)
    }
}

impl Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_body_is_kept_whole_and_the_watchers_fields_are_copied() {
        let body = json!({
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": "n", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "creationTimestamp": "2026-11-23T17:00:00Z", "labels": {"a": "b"},
                "managedFields": [{"manager": "kubectl", "time": "2026-11-23T17:00:00Z", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"x": [1, 2]}, "status": {"y": null},
        });
        let o: RawObject = serde_json::from_str(&body.to_string()).unwrap();
        assert_eq!(o.body(), &body);
        let m = o.meta();
        let got = (m.name.as_deref(), m.namespace.as_deref(), m.uid.as_deref(), m.resource_version.as_deref());
        assert_eq!(got, (Some("n"), Some("ns"), Some("u"), Some("7")));
        assert_eq!(serde_json::to_value(&o).unwrap(), body);
        // `kind` first (the dev cluster, built-in kinds) becomes the usual order; nothing else moves.
        let kind_first = r#"{"kind":"K","apiVersion":"v1","metadata":{"name":"a"},"data":{"z":1,"a":2}}"#;
        let o: RawObject = serde_json::from_str(kind_first).unwrap();
        assert_eq!(o.body().to_string(), r#"{"apiVersion":"v1","kind":"K","metadata":{"name":"a"},"data":{"z":1,"a":2}}"#);
        let no_types: RawObject = serde_json::from_str(r#"{"metadata":{"name":"b"},"spec":{}}"#).unwrap();
        assert_eq!(no_types.body().to_string(), r#"{"metadata":{"name":"b"},"spec":{}}"#);
        // Garbage metadata is no error: the fields are simply absent.
        let odd = RawObject::new(json!({"metadata": {"name": 5}}));
        assert_eq!(odd.meta().name, None);
        assert_eq!(odd.into_body(), json!({"metadata": {"name": 5}}));
    }
}
