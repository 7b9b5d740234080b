//! The object type the watch and the lists deserialise into: the whole body as JSON, parsed
//! once. kube's `DynamicObject` parses `metadata` into the typed `ObjectMeta` — every
//! timestamp and managedFields entry — and the runtime then had to serialise it back into
//! JSON: a round trip per event that cost more than the rest of the watch path. The watcher
//! needs only a resource's `ObjectMeta` for its bookkeeping (name, namespace, uid,
//! resourceVersion), so those few fields are copied beside the body.
//!
//! Each object is read on its own, to [`crate::json::MAX_DEPTH`] levels, from its raw text: a
//! list page or watch event decoded as a whole would fail with every other object in it when
//! one object is nested deeper than serde_json's 128 levels (the API server allows 10,000).
//! An object deeper than the controller reads is kept with its identity only and marked
//! ([`RawObject::too_deep`]), so that the watch can say which one it skips.

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
    /// The object's depth, when it is too deep to read: the body then holds only apiVersion,
    /// kind and the identifying metadata.
    too_deep: Option<usize>,
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
        RawObject { meta, body, too_deep: None }
    }

    /// How deeply the object nests, if deeper than the controller reads (its body then holds
    /// only what identifies it).
    pub fn too_deep(&self) -> Option<usize> {
        self.too_deep
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
        // The raw text is skipped over by serde_json without recursion, whatever its depth.
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        match crate::json::from_str(raw.get()) {
            Ok(body) => Ok(RawObject::new(usual_order(body))),
            Err(crate::json::Error::TooDeep { depth }) => identity(raw.get(), depth).map_err(serde::de::Error::custom),
            Err(crate::json::Error::Json(e)) => Err(serde::de::Error::custom(e)),
        }
    }
}

/// What identifies an object too deep to read: apiVersion, kind, and the metadata the watch
/// and a deletion need; every other field is skipped over without recursion.
fn identity(text: &str, depth: usize) -> Result<RawObject, serde_json::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        deletion_timestamp: Option<String>,
        finalizers: Option<Vec<String>>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Identity {
        api_version: Option<String>,
        kind: Option<String>,
        metadata: Option<Meta>,
    }
    let id: Identity = serde_json::from_str(text)?;
    let mut meta = serde_json::Map::new();
    if let Some(m) = id.metadata {
        let fields = [("name", m.name), ("namespace", m.namespace), ("uid", m.uid), ("resourceVersion", m.resource_version)];
        meta.extend(fields.into_iter().filter_map(|(k, v)| Some((k.to_string(), Value::String(v?)))));
        meta.extend(m.deletion_timestamp.map(|t| ("deletionTimestamp".to_string(), Value::String(t))));
        meta.extend(m.finalizers.map(|f| ("finalizers".to_string(), f.into())));
    }
    let mut body = serde_json::Map::new();
    body.extend(id.api_version.map(|v| ("apiVersion".to_string(), Value::String(v))));
    body.extend(id.kind.map(|v| ("kind".to_string(), Value::String(v))));
    body.insert("metadata".into(), Value::Object(meta));
    Ok(RawObject { too_deep: Some(depth), ..RawObject::new(Value::Object(body)) })
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

    /// An object nested `depth` levels, in its spec and in its managedFields.
    fn deep(name: &str, depth: usize) -> String {
        let (spec, fields) = (crate::json::nested(depth - 2), crate::json::nested(depth - 4));
        format!(
            r#"{{"apiVersion":"kopf.dev/v1","kind":"KopfExample","metadata":{{"name":"{name}","namespace":"ns","uid":"u-{name}","resourceVersion":"9","finalizers":["f"],"managedFields":[{{"fieldsV1":{fields}}}]}},"spec":{{"v":{spec}}}}}"#
        )
    }

    #[test]
    fn one_object_too_deep_is_marked_and_the_rest_of_its_page_and_its_watch_event_are_read() {
        let max = crate::json::MAX_DEPTH;
        let page = format!(
            r#"{{"apiVersion":"v1","kind":"List","metadata":{{"resourceVersion":"10"}},"items":[{},{},{}]}}"#,
            deep("shallow", 5),
            deep("deep", max),
            deep("deeper", max + 1)
        );
        let list: kube::core::ObjectList<RawObject> = serde_json::from_str(&page).expect("the page is read");
        let depths: Vec<Option<usize>> = list.items.iter().map(RawObject::too_deep).collect();
        assert_eq!(depths, [None, None, Some(max + 1)]);
        assert_eq!(list.items[1].body()["metadata"]["name"], "deep");
        let skipped = list.items[2].body();
        assert_eq!(
            skipped,
            &json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "deeper", "namespace": "ns",
                "uid": "u-deeper", "resourceVersion": "9", "finalizers": ["f"]}})
        );
        assert_eq!(list.items[2].meta().resource_version.as_deref(), Some("9"));
        for (name, depth, read) in [("deep", max, true), ("deeper", 5 * max, false)] {
            let line = format!(r#"{{"type":"MODIFIED","object":{}}}"#, deep(name, depth));
            match serde_json::from_str::<kube::core::WatchEvent<RawObject>>(&line).expect("the event is read") {
                kube::core::WatchEvent::Modified(o) => assert_eq!(o.too_deep().is_none(), read, "{name}"),
                other => panic!("{other:?}"),
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_object_reads_as_itself(body in crate::state::arbitrary::json()) {
            let body = serde_json::json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}, "spec": body});
            let o: RawObject = serde_json::from_str(&body.to_string()).unwrap();
            proptest::prop_assert_eq!(o.into_body(), body);
        }
    }
}
