//! The patch a handler accumulates while it runs (Kopf's `patch` kwarg). It travels back as
//! one JSON merge patch (RFC 7386) in `HandleResponse.merge_patch`, plus optional JSON-patch
//! operations; the controller merges it with the other handlers' patches of the same cycle and
//! writes everything in one request.
//!
//! [`Patch`] is a pure value; [`PatchRef`] is the handle that [`Cause::patch`](crate::Cause::patch)
//! gives out, locking the shared patch per call so that handlers may patch from spawned tasks
//! without deadlocks. In daemons, each change is sent to the controller at once.

use parking_lot::Mutex;
use serde_json::{Map, Value};

use crate::json;
use crate::live::Live;

/// An accumulated JSON merge patch and JSON-patch operations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Patch {
    merge: Map<String, Value>,
    json_ops: Vec<Value>,
}

impl Patch {
    /// An empty patch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Merges a merge-patch fragment into this patch, as if both were applied in turn: objects
    /// merge key by key, anything else (including `null`, which deletes) replaces.
    pub fn merge(&mut self, fragment: Value) -> &mut Self {
        match fragment {
            Value::Object(fragment) => merge_into(&mut self.merge, fragment),
            // A non-object merge patch replaces the whole object: never what a handler means.
            other => tracing::warn!("ignoring a merge patch that is not a JSON object: {other}"),
        }
        self
    }

    /// Sets the value at `path` (a list of keys, for example `["spec", "replicas"]`);
    /// `Value::Null` deletes it.
    pub fn set<'k>(&mut self, path: impl IntoIterator<Item = &'k str>, value: impl Into<Value>) -> &mut Self {
        let mut keys: Vec<&str> = path.into_iter().collect();
        let Some(last) = keys.pop() else { return self.merge(value.into()) };
        let mut fragment = Map::new();
        fragment.insert(last.to_string(), value.into());
        let fragment = keys.into_iter().rev().fold(fragment, |inner, key| {
            let mut outer = Map::new();
            outer.insert(key.to_string(), Value::Object(inner));
            outer
        });
        merge_into(&mut self.merge, fragment);
        self
    }

    /// Sets `status.<key>`.
    pub fn status(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.set(["status", key], value)
    }

    /// Sets `spec.<key>`.
    pub fn spec(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.set(["spec", key], value)
    }

    /// Sets the label `key` (keys may contain dots and slashes).
    pub fn label(&mut self, key: &str, value: &str) -> &mut Self {
        self.set(["metadata", "labels", key], value)
    }

    /// Removes the label `key`.
    pub fn remove_label(&mut self, key: &str) -> &mut Self {
        self.set(["metadata", "labels", key], Value::Null)
    }

    /// Sets the annotation `key`.
    pub fn annotation(&mut self, key: &str, value: &str) -> &mut Self {
        self.set(["metadata", "annotations", key], value)
    }

    /// Removes the annotation `key`.
    pub fn remove_annotation(&mut self, key: &str) -> &mut Self {
        self.set(["metadata", "annotations", key], Value::Null)
    }

    /// Appends a JSON-patch (RFC 6902) operation, applied after the merge patch, for what a merge
    /// patch cannot say (for example appending to a list):
    /// `json!({"op": "add", "path": "/spec/items/-", "value": "x"})`.
    pub fn json_op(&mut self, operation: Value) -> &mut Self {
        self.json_ops.push(operation);
        self
    }

    /// Whether nothing was patched.
    pub fn is_empty(&self) -> bool {
        self.merge.is_empty() && self.json_ops.is_empty()
    }

    /// The merge patch as a JSON object (`{}` when nothing was merged).
    pub fn merge_patch(&self) -> Value {
        Value::Object(self.merge.clone())
    }

    /// The JSON-patch operations, in order.
    pub fn json_ops(&self) -> &[Value] {
        &self.json_ops
    }

    /// Encodes the patch for `HandleResponse`: (merge_patch, json_patch), each empty when unused.
    pub(crate) fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        let merge = if self.merge.is_empty() { Vec::new() } else { json::encode(&self.merge) };
        let ops = if self.json_ops.is_empty() { Vec::new() } else { json::encode(&self.json_ops) };
        (merge, ops)
    }
}

/// Combines two merge patches: `target` then `fragment` ≡ `target` merged with `fragment`.
fn merge_into(target: &mut Map<String, Value>, fragment: Map<String, Value>) {
    for (key, value) in fragment {
        match (target.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(inner)) => merge_into(existing, inner),
            (_, value) => {
                target.insert(key, value);
            }
        }
    }
}

/// The handle to a cause's shared patch: every method locks, changes and unlocks it.
///
/// ```
/// # let cause = bosun_sdk::Cause::from_body(serde_json::json!({}));
/// cause.patch().status("phase", "Ready").label("app", "demo");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct PatchRef<'a> {
    patch: &'a Mutex<Patch>,
    /// For daemons: every change is sent at once.
    live: Option<&'a Live>,
}

macro_rules! delegate {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, $($arg: $ty),*) -> &Self {
            self.patch.lock().$name($($arg),*);
            self.send_if_live()
        }
    )*};
}

impl<'a> PatchRef<'a> {
    pub(crate) fn new(patch: &'a Mutex<Patch>, live: Option<&'a Live>) -> Self {
        PatchRef { patch, live }
    }

    fn send_if_live(&self) -> &Self {
        if let Some(live) = self.live {
            let (merge_patch, json_patch) = std::mem::take(&mut *self.patch.lock()).encode();
            live.patch(merge_patch, json_patch);
        }
        self
    }

    delegate! {
        /// Merges a merge-patch fragment; see [`Patch::merge`].
        fn merge(fragment: Value);
        /// Sets `status.<key>`.
        fn status(key: &str, value: impl Into<Value>);
        /// Sets `spec.<key>`.
        fn spec(key: &str, value: impl Into<Value>);
        /// Sets the label `key`.
        fn label(key: &str, value: &str);
        /// Removes the label `key`.
        fn remove_label(key: &str);
        /// Sets the annotation `key`.
        fn annotation(key: &str, value: &str);
        /// Removes the annotation `key`.
        fn remove_annotation(key: &str);
        /// Appends a JSON-patch operation; see [`Patch::json_op`].
        fn json_op(operation: Value);
    }

    /// Sets the value at `path`; see [`Patch::set`].
    pub fn set<'k>(&self, path: impl IntoIterator<Item = &'k str>, value: impl Into<Value>) -> &Self {
        self.patch.lock().set(path, value);
        self.send_if_live()
    }

    /// A copy of the patch as accumulated so far.
    pub fn snapshot(&self) -> Patch {
        self.patch.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merging_patches_equals_applying_them_in_turn() {
        let table = [
            (json!({}), json!({"a": 1}), json!({"a": 1})),
            (json!({"a": {"b": 1}}), json!({"a": {"c": 2}}), json!({"a": {"b": 1, "c": 2}})),
            (json!({"a": {"b": 1}}), json!({"a": {"b": null}}), json!({"a": {"b": null}})),
            (json!({"a": 1}), json!({"a": {"b": 2}}), json!({"a": {"b": 2}})),
            (json!({"a": {"b": 1}}), json!({"a": 3}), json!({"a": 3})),
            (json!({"a": [1, 2]}), json!({"a": [3]}), json!({"a": [3]})),
        ];
        for (first, second, expected) in table {
            let mut patch = Patch::new();
            patch.merge(first.clone()).merge(second.clone());
            assert_eq!(patch.merge_patch(), expected, "{first} + {second}");
        }
    }

    #[test]
    fn shortcuts_set_the_documented_paths() {
        let mut patch = Patch::new();
        patch
            .status("create_fn", json!({"message": "hello"}))
            .spec("size", 3)
            .label("app.kubernetes.io/name", "demo")
            .remove_label("old")
            .annotation("note", "x")
            .remove_annotation("gone")
            .set(["status", "nested", "deep"], true);
        assert_eq!(
            patch.merge_patch(),
            json!({
                "status": {"create_fn": {"message": "hello"}, "nested": {"deep": true}},
                "spec": {"size": 3},
                "metadata": {
                    "labels": {"app.kubernetes.io/name": "demo", "old": null},
                    "annotations": {"note": "x", "gone": null},
                },
            })
        );
    }

    #[test]
    fn an_empty_patch_encodes_to_empty_bytes() {
        assert_eq!(Patch::new().encode(), (vec![], vec![]));
        let mut patch = Patch::new();
        patch.json_op(json!({"op": "remove", "path": "/spec/x"}));
        let (merge, ops) = patch.encode();
        assert!(merge.is_empty());
        assert_eq!(serde_json::from_slice::<Value>(&ops).unwrap(), json!([{"op": "remove", "path": "/spec/x"}]));
    }

    #[test]
    fn a_patch_ref_changes_the_shared_patch() {
        let shared = Mutex::new(Patch::new());
        PatchRef::new(&shared, None).status("a", 1).label("k", "v");
        assert_eq!(shared.lock().merge_patch(), json!({"status": {"a": 1}, "metadata": {"labels": {"k": "v"}}}));
    }
}
