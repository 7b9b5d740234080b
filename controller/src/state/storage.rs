//! Where the controller keeps its state on an object, and the patches that change it.
//!
//! Two places, as DESIGN.md says: annotations (`<prefix>/last-handled-configuration`,
//! `<prefix>/<handler-id>`; always possible, Kopf's format) or, for custom resources whose
//! status subresource keeps unknown fields, `status.<prefix>` (`last-handled-configuration`
//! and `progress.<handler-id>`). Progress goes to status where it can, so that the records of
//! retries travel in the same `/status` write as the handlers' results. The diffbase goes to
//! its annotation by default whatever the progress storage (Kopf's `AnnotationsDiffBaseStorage`):
//! a status is lost more easily than metadata (a Velero restore, another controller's typed
//! status update, `kubectl replace --subresource=status`), and without the diffbase the next
//! cycle is a creation that runs the create handlers again. State is read from both places (the
//! one written to first), so switching storage loses nothing; a copy found in the other place
//! moves with the cycle's next write, whichever write that is (see [`Storage::patch`]).
//!
//! Annotation keys follow Kopf's convention ([`super::keys`]): the V2 key, and the V1 key where
//! it differs (long ids: field handlers, sub-handlers). In Kopf-compatible mode the state is
//! exactly what Kopf 1.44/1.45 reads and writes by default, so objects can move between Kopf
//! and Bosun both ways; see [`Convention::Kopf`].
//!
//! The patches given to [`Storage::patch`] may already hold handlers' merge patches. Where one
//! of them set `metadata`, `metadata.annotations`, `status` or a stanza under it to something
//! that is not an object (`{"status": "x"}`), the state cannot be added beside it: a merge
//! patch cannot both replace `status` and set a key inside it. The state wins (the value is
//! replaced by an object holding the state), because without it the handler's success would be
//! forgotten and the handler called again forever; [`Storage::patch`] tells which
//! paths were replaced, so the caller can say so. Nothing on `body` or in the patches panics.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::essence::PREFIX_MARKER;
use super::keys::kopf_keys;
use super::progress::ProgressRecord;
use crate::object;

/// Where new state is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageKind {
    /// In annotations (main resource write).
    Annotations,
    /// In the status stanza, `status.<prefix>` (`status.kopf` for Kopf; status subresource write).
    Status,
}

/// Whose naming the state on objects follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Convention {
    /// Bosun's own: annotations under V2 keys (V1 keys, which older Bosun builds wrote for long
    /// ids, are still read and purged), or `status.<prefix>`.
    Bosun,
    /// Kopf's defaults (`SmartProgressStorage`, `AnnotationsDiffBaseStorage`, both `v1=True`):
    /// progress and diffbase in annotations under the V2 key and the V1 key, both written;
    /// progress in `status.kopf.progress.<id>` (older Kopf versions) read and purged, never
    /// written; the diffbase read from status only where it is kept there
    /// (`StatusDiffBaseStorage`) or progress is.
    Kopf,
}

/// Names and places of the controller's marks on objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// Annotation prefix (`bosun.dev`, or `kopf.zalando.org` in Kopf-compatible mode).
    pub prefix: String,
    /// The finalizer's name.
    pub finalizer: String,
    /// Where new progress records go.
    pub kind: StorageKind,
    /// Where the diffbase goes: annotations unless chosen otherwise (Kopf's default), so that
    /// it survives losing the status.
    pub diffbase_kind: StorageKind,
    /// Whose key naming is used.
    pub convention: Convention,
    /// The stanza under `status` that holds state: the prefix for Bosun, `kopf` for Kopf, or
    /// what a Kopf operator chose (`status.<stanza>.progress`).
    pub stanza: String,
}

/// What the operator chose over the default naming and place of the controller's marks
/// (Kopf's `settings.persistence`, set by startup handlers): each part left unset keeps the
/// default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Persistence {
    /// The annotations' prefix.
    pub prefix: Option<String>,
    /// Kopf's key convention (V1 keys written beside V2 keys: Kopf's `v1`), else Bosun's.
    pub kopf_keys: Option<bool>,
    /// The stanza under `status` (`status.<stanza>.progress`).
    pub stanza: Option<String>,
    /// Where new progress records go (status only where the status keeps unknown fields).
    pub kind: Option<StorageKind>,
    /// Where the diffbase goes (status only where the status keeps unknown fields).
    pub diffbase_kind: Option<StorageKind>,
    /// The finalizer's name.
    pub finalizer: Option<String>,
}

impl Persistence {
    /// `base` with the chosen parts over it. A stanza not chosen follows the convention:
    /// `kopf` for Kopf's, the prefix for Bosun's.
    pub fn over(&self, base: Storage) -> Storage {
        let prefix = self.prefix.clone().unwrap_or(base.prefix);
        let convention = match self.kopf_keys {
            Some(true) => Convention::Kopf,
            Some(false) => Convention::Bosun,
            None => base.convention,
        };
        let stanza = self.stanza.clone().unwrap_or_else(|| match convention {
            Convention::Kopf => "kopf".into(),
            Convention::Bosun => prefix.clone(),
        });
        Storage {
            finalizer: self.finalizer.clone().unwrap_or(base.finalizer),
            kind: self.kind.unwrap_or(base.kind),
            diffbase_kind: self.diffbase_kind.unwrap_or(base.diffbase_kind),
            prefix,
            convention,
            stanza,
        }
    }
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
/// The annotation Kopf sets to wake itself up after a delay (and removes with its next patch).
const TOUCH: &str = "touch-dummy";

/// Kopf's mark on the keys of ReplicaSets owned by Deployments.
const DRS_MARK: &str = "-ofDRS";

/// Kopf's mark for the keys on ReplicaSets owned by Deployments: Kubernetes copies a
/// Deployment's annotations to its ReplicaSets, so their own state needs other keys.
fn collision_mark(body: &Value) -> &'static str {
    let owned_by_deployment = object::meta(body, "ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|owners| owners.iter().any(|o| o.get("kind").and_then(Value::as_str) == Some("Deployment")));
    if body.get("kind").and_then(Value::as_str) == Some("ReplicaSet") && owned_by_deployment { DRS_MARK } else { "" }
}

/// The slot at `path` in the merge patch `root`, made on the way. Values along the way that are
/// not objects are replaced by empty objects; their paths are added to `replaced`.
fn slot<'a>(root: &'a mut Value, path: &[&str], replaced: &mut Vec<String>) -> &'a mut Value {
    let mut cur = root;
    let mut at = String::new();
    let mut given = true;
    for p in path {
        if !cur.is_object() {
            if given {
                replaced.push(if at.is_empty() { "/".to_string() } else { at.clone() });
            }
            *cur = Value::Object(Map::new());
        }
        at.push('/');
        at.push_str(&p.replace('~', "~0").replace('/', "~1"));
        let obj = cur.as_object_mut().expect("made an object above");
        given = obj.contains_key(*p);
        cur = obj.entry(p.to_string()).or_insert(Value::Null);
    }
    cur
}

/// The patches being built, and what was replaced in them to make room for the state.
struct Writer<'p> {
    main: &'p mut Value,
    status: &'p mut Value,
    replaced: Vec<String>,
}

impl Writer<'_> {
    fn annotation(&mut self, key: &str, v: Value) {
        *slot(self.main, &["metadata", "annotations", key], &mut self.replaced) = v;
    }

    fn status(&mut self, stanza: &str, path: &[&str], v: Value) {
        let full: Vec<&str> = ["status", stanza].into_iter().chain(path.iter().copied()).collect();
        let mut replaced = Vec::new();
        *slot(self.status, &full, &mut replaced) = v;
        self.replaced.extend(replaced.into_iter().map(|p| format!("(status){p}")));
    }
}

impl Storage {
    /// Bosun's own naming under `prefix`, progress in `kind`, the diffbase in annotations.
    pub fn bosun(prefix: &str, kind: StorageKind) -> Storage {
        Storage {
            prefix: prefix.to_string(),
            finalizer: format!("{prefix}/finalizer"),
            kind,
            diffbase_kind: StorageKind::Annotations,
            convention: Convention::Bosun,
            stanza: prefix.to_string(),
        }
    }

    /// Kopf's exact keys and finalizer, in annotations.
    pub fn kopf() -> Storage {
        Storage {
            prefix: "kopf.zalando.org".into(),
            finalizer: "kopf.zalando.org/KopfFinalizerMarker".into(),
            kind: StorageKind::Annotations,
            diffbase_kind: StorageKind::Annotations,
            convention: Convention::Kopf,
            stanza: "kopf".into(),
        }
    }

    /// The stanza under `status` that holds state: `status.<prefix>`, `status.kopf` for Kopf,
    /// or the one chosen.
    pub fn status_stanza(&self) -> &str {
        &self.stanza
    }

    /// The annotation keys under which `name` (a handler id, the diffbase, the touch) may be
    /// found on `body`, in the order they are read: the V2 key, then the V1 key if it differs.
    pub fn annotation_keys(&self, body: &Value, name: &str) -> Vec<String> {
        kopf_keys(&self.prefix, &format!("{name}{}", collision_mark(body)))
    }

    /// The annotation keys that are written for `name`: both versions for Kopf (so that Kopf
    /// versions reading either find it), the V2 key only for Bosun.
    pub fn written_keys(&self, body: &Value, name: &str) -> Vec<String> {
        let mut keys = self.annotation_keys(body, name);
        if self.convention == Convention::Bosun {
            keys.truncate(1);
        }
        keys
    }

    fn annotations<'a>(&self, body: &'a Value) -> Option<&'a Map<String, Value>> {
        object::meta(body, "annotations").and_then(Value::as_object)
    }

    fn status_state<'a>(&self, body: &'a Value) -> Option<&'a Value> {
        body.get("status").and_then(|s| s.get(self.status_stanza()))
    }

    /// Whether a diffbase in the status stanza counts: Bosun's older builds kept it there; Kopf
    /// keeps its diffbase in annotations only, unless told otherwise (or told to keep progress
    /// there, with which Bosun's older builds kept the diffbase too).
    fn diffbase_in_status(&self) -> bool {
        self.convention == Convention::Bosun || self.kind == StorageKind::Status || self.diffbase_kind == StorageKind::Status
    }

    /// The first value among `keys` in the annotations that is a string.
    fn first_annotation<'a>(ann: Option<&'a Map<String, Value>>, keys: &[String]) -> Option<&'a str> {
        keys.iter().find_map(|k| ann.and_then(|a| a.get(k)).and_then(Value::as_str))
    }

    /// The ids of the handlers with progress records on `body`: in the status stanza, and
    /// under this prefix in annotations (an id read back from its key, where `/` became `.`).
    pub fn recorded_ids(&self, body: &Value) -> Vec<String> {
        let mut ids = std::collections::BTreeSet::new();
        if let Some(p) = self.status_state(body).and_then(|s| s.get("progress")).and_then(Value::as_object) {
            ids.extend(p.keys().cloned());
        }
        let prefix = format!("{}/", self.prefix);
        for (key, value) in self.annotations(body).into_iter().flatten() {
            let Some(name) = key.strip_prefix(&prefix) else { continue };
            let other_mark = name.starts_with(DIFFBASE) || name.starts_with(TOUCH) || name.ends_with(".result");
            if !other_mark && value.as_str().and_then(ProgressRecord::decode).is_some() {
                ids.insert(name.trim_end_matches(DRS_MARK).to_string());
            }
        }
        ids.into_iter().collect()
    }

    /// Whether the object carries our finalizer.
    pub fn has_finalizer(&self, body: &Value) -> bool {
        object::meta(body, "finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|v| v.as_str() == Some(self.finalizer.as_str())))
    }

    /// Reads the state of handlers `ids` from both places (the one written to first).
    pub fn read<'a>(&self, body: &Value, ids: impl IntoIterator<Item = &'a str>) -> ObjectState {
        let ann = self.annotations(body);
        let st = self.status_state(body);
        let status_first = self.kind == StorageKind::Status;
        let from_ann = Self::first_annotation(ann, &self.annotation_keys(body, DIFFBASE));
        let from_st = st.filter(|_| self.diffbase_in_status()).and_then(|s| s.get(DIFFBASE)).and_then(Value::as_str);
        let diffbase = match self.diffbase_kind {
            StorageKind::Status => from_st.or(from_ann),
            StorageKind::Annotations => from_ann.or(from_st),
        }
        .map(String::from);
        let mut progress = BTreeMap::new();
        for id in ids {
            let from_st = || {
                st.and_then(|s| s.get("progress"))
                    .and_then(|p| p.get(id))
                    .and_then(|v| serde_json::from_value::<ProgressRecord>(v.clone()).ok())
            };
            let from_ann = || {
                self.annotation_keys(body, id)
                    .iter()
                    .find_map(|k| ann.and_then(|a| a.get(k)).and_then(Value::as_str).and_then(ProgressRecord::decode))
            };
            let record = if status_first { from_st().or_else(from_ann) } else { from_ann().or_else(from_st) };
            if let Some(r) = record {
                progress.insert(id.to_string(), r);
            }
        }
        ObjectState { diffbase, progress }
    }

    /// The ids among `ids` whose progress is on the object but cannot be read (anyone who may
    /// edit the object may write anything there): they read as not started.
    pub fn unreadable<'a>(&self, body: &Value, ids: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let ann = self.annotations(body);
        let progress = self.status_state(body).and_then(|s| s.get("progress"));
        let bad_ann = |k: &String| ann.and_then(|a| a.get(k)).is_some_and(|v| v.as_str().and_then(ProgressRecord::decode).is_none());
        let bad_st =
            |id: &str| progress.and_then(|p| p.get(id)).is_some_and(|v| serde_json::from_value::<ProgressRecord>(v.clone()).is_err());
        ids.into_iter().filter(|id| bad_st(id) || self.annotation_keys(body, id).iter().any(bad_ann)).map(String::from).collect()
    }

    /// Adds to `main` and `status` (merge patches of the main resource and of the status
    /// subresource) what turns the state on `body` into `desired`. Progress of ids not in
    /// `desired` but present on the object is removed; stale copies in the other place and
    /// under other key versions too (a diffbase's only with a write the cycle makes anyway; a
    /// status stanza left empty goes whole). Never panics; see the module docs for patches that
    /// hold non-objects where the state goes. Returns the paths (JSON pointers; `(status)` for
    /// the status patch) where a non-object in the given patches was replaced to make room for
    /// the state.
    pub fn patch(&self, body: &Value, desired: &ObjectState, ids: &[&str], main: &mut Value, status: &mut Value) -> Vec<String> {
        let current = self.read(body, ids.iter().copied());
        let ann = self.annotations(body);
        let st = self.status_state(body);
        let stanza = self.status_stanza().to_string();
        let ann_has = |key: &String| ann.is_some_and(|a| a.contains_key(key));
        let st_progress_has = |id: &str| st.and_then(|s| s.get("progress")).and_then(|p| p.get(id)).is_some();
        let mut w = Writer { main, status, replaced: Vec::new() };

        // Progress records.
        for id in ids {
            let want = desired.progress.get(*id);
            let keys = self.annotation_keys(body, id);
            let written = self.written_keys(body, id);
            let in_ann: Vec<&String> = keys.iter().filter(|k| ann_has(k)).collect();
            let in_st = st_progress_has(id);
            let changed = want != current.progress.get(*id);
            match (self.kind, want) {
                (StorageKind::Annotations, Some(r)) if changed || in_st || in_ann.iter().any(|k| !written.contains(k)) => {
                    for k in &written {
                        w.annotation(k, Value::String(r.encode()));
                    }
                    for k in in_ann.iter().filter(|k| !written.contains(k)) {
                        w.annotation(k, Value::Null);
                    }
                    if in_st {
                        w.status(&stanza, &["progress", id], Value::Null);
                    }
                }
                (StorageKind::Status, Some(r)) if changed || !in_ann.is_empty() => {
                    w.status(&stanza, &["progress", id], serde_json::to_value(r).expect("records serialize"));
                    for k in &in_ann {
                        w.annotation(k, Value::Null);
                    }
                }
                (_, None) => {
                    for k in &in_ann {
                        w.annotation(k, Value::Null);
                    }
                    if in_st {
                        w.status(&stanza, &["progress", id], Value::Null);
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
            w.status(&stanza, &["progress"], Value::Null);
        }
        // The diffbase last: whether the cycle writes anyway decides whether a copy in another
        // place moves now.
        // A cause done: its progress purged by the status write, which comes before the main
        // write with the diffbase annotation.
        let purges = self.kind == StorageKind::Status && desired.progress.is_empty() && !current.progress.is_empty();
        self.place_diffbase(body, desired.diffbase.as_deref(), current.diffbase.as_deref(), purges, &mut w);
        // A stanza left with nothing in it goes too, rather than stay behind as `{}`.
        if let Some(on_body) = st.and_then(Value::as_object)
            && let Some(patched) = w.status.get("status").and_then(|s| s.get(&stanza)).and_then(Value::as_object)
            && patched.values().all(Value::is_null)
            && on_body.keys().all(|k| patched.get(k).is_some_and(Value::is_null))
            && let Some(status) = w.status.get_mut("status").and_then(Value::as_object_mut)
        {
            status.insert(stanza.clone(), Value::Null);
        }
        self.mark_prefix(body, &mut w);
        // Kopf removes its wake-up annotation with any patch it makes anyway; so does Bosun in
        // Kopf's convention (never with a write of its own).
        if self.convention == Convention::Kopf && !is_empty_patch(w.main) {
            for k in self.annotation_keys(body, TOUCH).iter().filter(|k| ann_has(k)) {
                w.annotation(k, Value::Null);
            }
        }
        w.replaced
    }
}

impl Storage {
    /// Marks the prefix as Kopf does (`<prefix>/kopf-managed: yes`, with the first state
    /// annotation written under it; never for Kopf's own `kopf.*` prefixes), so that other
    /// operators, Kopf's and Bosun's, leave our annotations out of their essence.
    fn mark_prefix(&self, body: &Value, w: &mut Writer) {
        if self.prefix.starts_with("kopf.") {
            return;
        }
        let own = format!("{}/", self.prefix);
        let marker = format!("{own}{PREFIX_MARKER}");
        let stores = w
            .main
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.iter().any(|(k, v)| k.starts_with(&own) && !v.is_null()));
        if stores && !self.annotations(body).is_some_and(|a| a.contains_key(&marker)) {
            w.annotation(&marker, Value::String("yes".into()));
        }
    }

    /// Adds the diffbase's change to `w`: written where it goes when it changed, copies in the
    /// other place or under keys no longer written purged. A diffbase that did not change but
    /// is not (only) where it goes moves only when the cycle writes anyway (`w` holds
    /// something): never a write of its own, so a cycle that writes only the status (a retry's
    /// progress) does not grow a main write, nor the reverse, for a move alone. When the
    /// diffbase changed, both writes may be needed: the annotation in the main write, its old
    /// copy purged in the status write.
    fn place_diffbase(&self, body: &Value, desired: Option<&str>, current: Option<&str>, purges: bool, w: &mut Writer) {
        let ann = self.annotations(body);
        let keys = self.annotation_keys(body, DIFFBASE);
        let written = self.written_keys(body, DIFFBASE);
        let in_ann: Vec<&String> = keys.iter().filter(|k| ann.is_some_and(|a| a.contains_key(k.as_str()))).collect();
        let in_st = self.diffbase_in_status() && self.status_state(body).and_then(|s| s.get(DIFFBASE)).is_some();
        let misplaced = match self.diffbase_kind {
            StorageKind::Annotations => {
                in_st || in_ann.iter().any(|k| !written.contains(k)) || (current.is_some() && written.iter().any(|k| !in_ann.contains(&k)))
            }
            StorageKind::Status => !in_ann.is_empty() || (current.is_some() && !in_st),
        };
        let writes_anyway = !is_empty_patch(w.main) || !is_empty_patch(w.status);
        if desired == current && !(misplaced && writes_anyway) {
            return;
        }
        let v = desired.map_or(Value::Null, |d| Value::String(d.to_string()));
        match self.diffbase_kind {
            StorageKind::Annotations => {
                for k in written.iter().filter(|k| ann.and_then(|a| a.get(k.as_str())) != Some(&v)) {
                    w.annotation(k, v.clone());
                }
                for k in in_ann.iter().filter(|k| !written.contains(k)) {
                    w.annotation(k, Value::Null);
                }
                // The status write goes before the main write that stores the annotation
                // (`runtime::writes`): a copy of the diffbase in status says the cause is
                // handled should the main write not follow (a failure, a revocation, a crash
                // between the two), rather than leave an object with neither progress nor
                // diffbase, whose handlers would all run again. So the copy is written when the
                // status write purges the progress, kept (updated) while the annotation does
                // not hold the diffbase yet, and removed only by a write made against a body
                // whose annotation holds it: the copy is read only where the annotation is
                // missing. (A cause ended in one cycle has no progress to purge: should its
                // annotation's write fail, its handlers are called again, at-least-once.)
                let annotated = !written.is_empty() && written.iter().all(|k| ann.and_then(|a| a.get(k.as_str())) == Some(&v));
                let copy = self.status_state(body).and_then(|s| s.get(DIFFBASE));
                if desired.is_some() && !annotated && self.diffbase_in_status() && ((purges && desired != current) || in_st) {
                    if copy != Some(&v) {
                        w.status(self.status_stanza(), &[DIFFBASE], v.clone());
                    }
                } else if in_st && (annotated || desired.is_none()) {
                    w.status(self.status_stanza(), &[DIFFBASE], Value::Null);
                }
            }
            StorageKind::Status => {
                w.status(self.status_stanza(), &[DIFFBASE], v);
                for k in &in_ann {
                    w.annotation(k, Value::Null);
                }
            }
        }
    }

    /// Moves the diffbase's annotations (stored, or removed where misplaced) out of the main
    /// patch `main` into a patch of their own, written after the status write (see
    /// `runtime::writes`); empty when `main` has none.
    pub fn take_diffbase(&self, body: &Value, main: &mut Value) -> Value {
        let keys = self.annotation_keys(body, DIFFBASE);
        let mut taken = Map::new();
        if let Some(ann) = main.get_mut("metadata").and_then(|m| m.get_mut("annotations")).and_then(Value::as_object_mut) {
            for k in &keys {
                if let Some(v) = ann.remove(k) {
                    taken.insert(k.clone(), v);
                }
            }
            let emptied = ann.is_empty();
            if let Some(meta) = main.get_mut("metadata").and_then(Value::as_object_mut) {
                if emptied {
                    meta.remove("annotations");
                }
                if meta.is_empty()
                    && let Some(root) = main.as_object_mut()
                {
                    root.remove("metadata");
                }
            }
        }
        if taken.is_empty() { serde_json::json!({}) } else { serde_json::json!({"metadata": {"annotations": taken}}) }
    }
}

/// The API server's limit on all annotations of an object, keys and values together.
pub const ANNOTATIONS_LIMIT: usize = 256 * 1024;

impl Storage {
    /// Whether a diffbase of this text still fits in the annotations of `body` (when
    /// annotations hold the state); `Err(total)` gives the size it would make.
    pub fn diffbase_fits(&self, body: &Value, diffbase: &str) -> Result<(), usize> {
        if self.diffbase_kind != StorageKind::Annotations {
            return Ok(());
        }
        let all = self.annotation_keys(body, DIFFBASE);
        let others: usize = self
            .annotations(body)
            .map(|a| a.iter().filter(|(k, _)| !all.contains(k)).map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum())
            .unwrap_or(0);
        let total = others + self.written_keys(body, DIFFBASE).iter().map(|k| k.len() + diffbase.len()).sum::<usize>();
        if total > ANNOTATIONS_LIMIT { Err(total) } else { Ok(()) }
    }
}

/// Whether a merge patch changes nothing.
pub fn is_empty_patch(p: &Value) -> bool {
    p.as_object().is_none_or(Map::is_empty)
}

#[cfg(test)]
mod tests;
