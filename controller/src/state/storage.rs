//! Where the controller keeps its state on an object, and the patches that change it.
//!
//! Two places, as DESIGN.md says: annotations (`<prefix>/last-handled-configuration`,
//! `<prefix>/<handler-id>`; always possible, Kopf's format) or, for custom resources whose
//! status subresource keeps unknown fields, `status.<prefix>` (`last-handled-configuration`
//! and `progress.<handler-id>`), so the state travels in the same `/status` write as the
//! handlers' results. State is read from both places, so switching storage loses nothing.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::progress::{ProgressRecord, annotation_key};

/// Where new state is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageKind {
    /// In annotations (main resource write).
    Annotations,
    /// In `status.<prefix>` (status subresource write).
    Status,
}

/// Names and places of the controller's marks on objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// Annotation prefix (`bosun.dev`, or `kopf.zalando.org` in Kopf-compatible mode).
    pub prefix: String,
    /// The finalizer's name.
    pub finalizer: String,
    /// Where new state goes.
    pub kind: StorageKind,
}

/// The state found on an object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectState {
    /// The stored diffbase text, if any.
    pub diffbase: Option<String>,
    /// Progress records by handler id.
    pub progress: BTreeMap<String, ProgressRecord>,
}

const DIFFBASE: &str = "last-handled-configuration";

impl Storage {
    /// Bosun's own naming under `prefix`.
    pub fn bosun(prefix: &str, kind: StorageKind) -> Storage {
        Storage { prefix: prefix.to_string(), finalizer: format!("{prefix}/finalizer"), kind }
    }

    /// Kopf's exact keys and finalizer, in annotations.
    pub fn kopf() -> Storage {
        Storage {
            prefix: "kopf.zalando.org".into(),
            finalizer: "kopf.zalando.org/KopfFinalizerMarker".into(),
            kind: StorageKind::Annotations,
        }
    }

    fn annotations<'a>(&self, body: &'a Value) -> Option<&'a Map<String, Value>> {
        body.pointer("/metadata/annotations").and_then(Value::as_object)
    }

    fn status_state<'a>(&self, body: &'a Value) -> Option<&'a Value> {
        body.get("status").and_then(|s| s.get(&self.prefix))
    }

    /// Whether the object carries our finalizer.
    pub fn has_finalizer(&self, body: &Value) -> bool {
        body.pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|v| v.as_str() == Some(self.finalizer.as_str())))
    }

    /// Reads the state of handlers `ids` from both places (status first).
    pub fn read<'a>(&self, body: &Value, ids: impl IntoIterator<Item = &'a str>) -> ObjectState {
        let ann = self.annotations(body);
        let st = self.status_state(body);
        let diffbase = st
            .and_then(|s| s.get(DIFFBASE))
            .and_then(Value::as_str)
            .or_else(|| ann.and_then(|a| a.get(&format!("{}/{DIFFBASE}", self.prefix))).and_then(Value::as_str))
            .map(String::from);
        let mut progress = BTreeMap::new();
        for id in ids {
            let from_status = st
                .and_then(|s| s.get("progress"))
                .and_then(|p| p.get(id))
                .and_then(|v| serde_json::from_value::<ProgressRecord>(v.clone()).ok());
            let record = from_status.or_else(|| {
                ann.and_then(|a| a.get(&annotation_key(&self.prefix, id))).and_then(Value::as_str).and_then(ProgressRecord::decode)
            });
            if let Some(r) = record {
                progress.insert(id.to_string(), r);
            }
        }
        ObjectState { diffbase, progress }
    }

    /// Adds to `main` and `status` (merge patches of the main resource and of the status
    /// subresource) what turns the state on `body` into `desired`. Progress of ids not in
    /// `desired` but present on the object is removed; stale copies in the other place too.
    pub fn patch(&self, body: &Value, desired: &ObjectState, ids: &[&str], main: &mut Value, status: &mut Value) {
        let current = self.read(body, ids.iter().copied());
        let ann = self.annotations(body);
        let st = self.status_state(body);
        let ann_has = |key: &str| ann.is_some_and(|a| a.contains_key(key));
        let st_progress_has = |id: &str| st.and_then(|s| s.get("progress")).and_then(|p| p.get(id)).is_some();
        let diffbase_key = format!("{}/{DIFFBASE}", self.prefix);
        let set_ann = |main: &mut Value, key: &str, v: Value| {
            main["metadata"]["annotations"][key] = v;
        };
        let set_st = |status: &mut Value, path: &[&str], v: Value| {
            let mut cur = &mut status["status"][self.prefix.as_str()];
            for p in path {
                cur = &mut cur[*p];
            }
            *cur = v;
        };
        // The diffbase.
        if desired.diffbase != current.diffbase || (self.kind == StorageKind::Status && ann_has(&diffbase_key)) {
            let v = desired.diffbase.clone().map(Value::String).unwrap_or(Value::Null);
            match self.kind {
                StorageKind::Annotations => set_ann(main, &diffbase_key, v),
                StorageKind::Status => {
                    set_st(status, &[DIFFBASE], v);
                    if ann_has(&diffbase_key) {
                        set_ann(main, &diffbase_key, Value::Null);
                    }
                }
            }
        }
        // Progress records.
        for id in ids {
            let want = desired.progress.get(*id);
            let key = annotation_key(&self.prefix, id);
            let (in_ann, in_st) = (ann_has(&key), st_progress_has(id));
            let changed = want != current.progress.get(*id);
            match (self.kind, want) {
                (StorageKind::Annotations, Some(r)) if changed || in_st => {
                    set_ann(main, &key, Value::String(r.encode()));
                    if in_st {
                        set_st(status, &["progress", id], Value::Null);
                    }
                }
                (StorageKind::Status, Some(r)) if changed || in_ann => {
                    set_st(status, &["progress", id], serde_json::to_value(r).expect("records serialize"));
                    if in_ann {
                        set_ann(main, &key, Value::Null);
                    }
                }
                (_, None) => {
                    if in_ann {
                        set_ann(main, &key, Value::Null);
                    }
                    if in_st {
                        set_st(status, &["progress", id], Value::Null);
                    }
                }
                _ => {}
            }
        }
        // When no progress is left at all, drop the whole map rather than leave `{}` behind.
        let st_progress = st.and_then(|s| s.get("progress")).and_then(Value::as_object);
        if let Some(p) = st_progress
            && ids.iter().all(|id| !desired.progress.contains_key(*id))
            && p.keys().all(|k| ids.contains(&k.as_str()))
        {
            set_st(status, &["progress"], Value::Null);
        }
    }
}

/// The API server's limit on all annotations of an object, keys and values together.
pub const ANNOTATIONS_LIMIT: usize = 256 * 1024;

impl Storage {
    /// Whether a diffbase of this text still fits in the annotations of `body` (when
    /// annotations hold the state); `Err(total)` gives the size it would make.
    pub fn diffbase_fits(&self, body: &Value, diffbase: &str) -> Result<(), usize> {
        if self.kind != StorageKind::Annotations {
            return Ok(());
        }
        let key = format!("{}/{DIFFBASE}", self.prefix);
        let others: usize = self
            .annotations(body)
            .map(|a| a.iter().filter(|(k, _)| **k != key).map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum())
            .unwrap_or(0);
        let total = others + key.len() + diffbase.len();
        if total > ANNOTATIONS_LIMIT { Err(total) } else { Ok(()) }
    }
}

/// An empty merge patch.
pub fn empty_patch() -> Value {
    json!({})
}

/// Whether a merge patch changes nothing.
pub fn is_empty_patch(p: &Value) -> bool {
    p.as_object().is_none_or(Map::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(purpose: &str) -> ProgressRecord {
        ProgressRecord { purpose: Some(purpose.into()), retries: Some(1), ..Default::default() }
    }

    #[test]
    fn state_is_read_from_annotations_and_status() {
        let s = Storage::bosun("bosun.dev", StorageKind::Status);
        let body = json!({"metadata": {"annotations": {
            "bosun.dev/last-handled-configuration": "{}\n",
            "bosun.dev/a": rec("create").encode(),
            "bosun.dev/p.c": rec("update").encode(),
        }}, "status": {"bosun.dev": {"progress": {"b": {"purpose": "create", "retries": 1}}}}});
        let st = s.read(&body, ["a", "b", "p/c", "missing"]);
        assert_eq!(st.diffbase.as_deref(), Some("{}\n"));
        assert_eq!(st.progress.keys().collect::<Vec<_>>(), vec!["a", "b", "p/c"]);
        assert_eq!(st.progress["b"], rec("create"));
        let body = json!({"status": {"bosun.dev": {"last-handled-configuration": "{\"spec\":{}}\n"}}});
        assert_eq!(s.read(&body, []).diffbase.as_deref(), Some("{\"spec\":{}}\n"));
    }

    #[test]
    fn patches_write_to_the_chosen_place_and_purge_the_other() {
        let ann_body = json!({"metadata": {"annotations": {"bosun.dev/a": rec("create").encode()}}});
        let st_body = json!({"status": {"bosun.dev": {"progress": {"a": {"purpose": "create", "retries": 1}}}}});
        let done = ObjectState { diffbase: Some("{}\n".into()), progress: BTreeMap::new() };
        let cases = [
            (
                StorageKind::Annotations,
                json!({}),
                done.clone(),
                json!({"metadata": {"annotations": {"bosun.dev/last-handled-configuration": "{}\n"}}}),
                json!({}),
            ),
            (
                StorageKind::Status,
                json!({}),
                done.clone(),
                json!({}),
                json!({"status": {"bosun.dev": {"last-handled-configuration": "{}\n"}}}),
            ),
            (
                StorageKind::Status,
                ann_body.clone(),
                done.clone(),
                json!({"metadata": {"annotations": {"bosun.dev/a": null}}}),
                json!({"status": {"bosun.dev": {"last-handled-configuration": "{}\n"}}}),
            ),
            (
                StorageKind::Annotations,
                st_body.clone(),
                ObjectState { diffbase: None, progress: [("a".to_string(), rec("create"))].into() },
                json!({"metadata": {"annotations": {"bosun.dev/a": rec("create").encode()}}}),
                json!({"status": {"bosun.dev": {"progress": {"a": null}}}}),
            ),
            (
                StorageKind::Status,
                st_body.clone(),
                ObjectState { diffbase: None, progress: [("a".to_string(), rec("create"))].into() },
                json!({}),
                json!({}),
            ),
            (StorageKind::Status, st_body.clone(), ObjectState::default(), json!({}), json!({"status": {"bosun.dev": {"progress": null}}})),
        ];
        for (kind, body, desired, want_main, want_status) in cases {
            let s = Storage::bosun("bosun.dev", kind);
            let (mut main, mut status) = (json!({}), json!({}));
            s.patch(&body, &desired, &["a"], &mut main, &mut status);
            assert_eq!((main, status), (want_main, want_status), "{kind:?} {body}");
        }
    }

    #[test]
    fn diffbases_too_large_for_annotations_are_caught_before_writing() {
        let body = json!({"metadata": {"annotations": {"big": "x".repeat(200_000)}}});
        let cases =
            [(StorageKind::Annotations, 1_000, true), (StorageKind::Annotations, 70_000, false), (StorageKind::Status, 70_000, true)];
        for (kind, size, fits) in cases {
            let s = Storage::bosun("bosun.dev", kind);
            assert_eq!(s.diffbase_fits(&body, &"d".repeat(size)).is_ok(), fits, "{kind:?} {size}");
        }
    }

    #[test]
    fn finalizer_names_differ_between_bosun_and_kopf_modes() {
        let body = json!({"metadata": {"finalizers": ["x", "kopf.zalando.org/KopfFinalizerMarker"]}});
        assert!(Storage::kopf().has_finalizer(&body));
        assert!(!Storage::bosun("bosun.dev", StorageKind::Status).has_finalizer(&body));
        assert_eq!(Storage::bosun("bosun.dev", StorageKind::Status).finalizer, "bosun.dev/finalizer");
    }
}
