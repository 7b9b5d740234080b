//! The object store: one table per stored resource, each behind its own lock, holding every
//! object's parsed JSON and its serialized bytes (so a GET is a lookup and a copy) plus a
//! bounded history of watch events; one cluster-wide resourceVersion counter that only
//! increases. Writes to one table are serialized, so conflict checks and event order are exact.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::{BufMut, Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::sync::watch;

use crate::persist::Log;
use crate::status::ApiResult;

/// A stored object: its JSON value and cached serialization.
#[derive(Debug)]
pub struct Obj {
    /// The object as stored (core shape for Events).
    pub value: Value,
    /// The object serialized as JSON.
    pub bytes: Bytes,
    /// Length of the leading `{"kind":..,"apiVersion":..,` that list items leave out (0: keep all).
    pub type_prefix: usize,
    /// The object's resourceVersion.
    pub rv: u64,
}

impl Obj {
    /// Serialize `value`; `strip_type` remembers where kind/apiVersion end for list items.
    pub fn new(value: Value, rv: u64, strip_type: bool) -> Arc<Obj> {
        let bytes = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        let type_prefix = if strip_type { type_prefix_len(&value) } else { 0 };
        Arc::new(Obj { value, bytes, type_prefix, rv })
    }

    /// Append the object as a list item (without kind/apiVersion for built-ins).
    pub fn write_item(&self, out: &mut BytesMut) {
        if self.type_prefix > 0 {
            out.put_u8(b'{');
            out.put_slice(&self.bytes[self.type_prefix..]);
        } else {
            out.put_slice(&self.bytes);
        }
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        crate::registry::namespace_of(&self.value)
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        crate::registry::name_of(&self.value)
    }
}

/// Length of `{"kind":K,"apiVersion":A,` if the object starts with exactly those keys.
fn type_prefix_len(value: &Value) -> usize {
    let Some(map) = value.as_object() else {
        return 0;
    };
    let mut keys = map.iter();
    let (Some((k1, v1)), Some((k2, v2)), Some(_)) = (keys.next(), keys.next(), keys.next()) else {
        return 0;
    };
    if k1 != "kind" || k2 != "apiVersion" {
        return 0;
    }
    let l1 = serde_json::to_string(v1).map(|s| s.len()).unwrap_or(0);
    let l2 = serde_json::to_string(v2).map(|s| s.len()).unwrap_or(0);
    // {"kind":  + v1 + ,"apiVersion": + v2 + ,
    1 + 7 + l1 + 14 + l2 + 1
}

/// Watch event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change of one table.
#[derive(Debug)]
pub struct Event {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for DELETED: the last state, at the deletion's rv).
    pub obj: Arc<Obj>,
    /// The object before the change (MODIFIED and DELETED).
    pub prev: Option<Arc<Obj>>,
    /// Bytes of the table's events before this one, ever (to tell how far behind a watcher is).
    start: u64,
    line: OnceLock<Bytes>,
}

impl Event {
    /// `{"type":..,"object":..}\n`, computed once and shared by all watchers.
    pub fn line(&self) -> Bytes {
        self.line.get_or_init(|| encode_event(self.kind.as_str(), &self.obj.bytes)).clone()
    }
}

/// Encode one watch event line.
pub fn encode_event(kind: &str, object: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(object.len() + 32);
    out.put_slice(b"{\"type\":\"");
    out.put_slice(kind.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
    out.freeze()
}

/// A write decided and serialized outside the lock, waiting for its resourceVersion.
enum Prepared {
    Keep,
    Put(Value, Encoded),
    Delete(Value, Encoded),
}

/// An object's JSON split where its resourceVersion's value goes: the version is handed out
/// under the table's lock, and putting it in is then a copy, not a serialization.
#[derive(Debug)]
struct Encoded {
    /// Up to and including `"resourceVersion":` (the whole object if it has no metadata).
    head: Vec<u8>,
    /// What follows the version's value (`None`: the object has no metadata to put it in).
    tail: Option<Vec<u8>>,
}

impl Encoded {
    /// Serialize `value`, with `metadata.resourceVersion` where the object will carry it.
    fn new(mut value: Value) -> (Value, Encoded) {
        set_rv(&mut value, 0); // its place among the metadata keys
        let mut out = Encoded { head: Vec::with_capacity(256), tail: None };
        let Some(map) = value.as_object() else {
            out.head = serde_json::to_vec(&value).unwrap_or_default();
            return (value, out);
        };
        out.head.push(b'{');
        for (i, (k, v)) in map.iter().enumerate() {
            let buf = out.buf();
            write_key(buf, i, k);
            match v.as_object() {
                Some(meta) if k == "metadata" => {
                    buf.push(b'{');
                    for (j, (mk, mv)) in meta.iter().enumerate() {
                        let buf = out.buf();
                        write_key(buf, j, mk);
                        if mk == "resourceVersion" {
                            out.tail = Some(Vec::with_capacity(256));
                        } else {
                            let _ = serde_json::to_writer(&mut *buf, mv);
                        }
                    }
                    out.buf().push(b'}');
                }
                _ => {
                    let _ = serde_json::to_writer(&mut *buf, v);
                }
            }
        }
        out.buf().push(b'}');
        (value, out)
    }

    /// The buffer being written: the head until the version's place, then the tail.
    fn buf(&mut self) -> &mut Vec<u8> {
        self.tail.as_mut().unwrap_or(&mut self.head)
    }

    /// The length of the object's JSON, but for the version's digits.
    fn len(&self) -> usize {
        self.head.len() + self.tail.as_ref().map_or(0, |t| t.len() + 2)
    }

    /// The stored object at version `rv`.
    fn into_obj(self, mut value: Value, rv: u64, strip_type: bool) -> Arc<Obj> {
        let bytes = match self.tail {
            None => Bytes::from(self.head),
            Some(tail) => {
                let digits = rv.to_string();
                let mut out = BytesMut::with_capacity(self.head.len() + digits.len() + 2 + tail.len());
                out.put_slice(&self.head);
                out.put_u8(b'"');
                out.put_slice(digits.as_bytes());
                out.put_u8(b'"');
                out.put_slice(&tail);
                out.freeze()
            }
        };
        set_rv(&mut value, rv);
        let type_prefix = if strip_type { type_prefix_len(&value) } else { 0 };
        Arc::new(Obj { value, bytes, type_prefix, rv })
    }
}

/// `,"key":` (without the comma for the first key of an object).
fn write_key(buf: &mut Vec<u8>, index: usize, key: &str) {
    if index > 0 {
        buf.push(b',');
    }
    let _ = serde_json::to_writer(&mut *buf, key);
    buf.push(b':');
}

/// The largest object stored: etcd's default request limit (`--max-request-bytes`, 1.5 MiB),
/// here on the object's JSON (a real server stores built-ins as protobuf, a little smaller).
pub const MAX_OBJECT_BYTES: usize = 1024 * 1024 * 3 / 2;

/// What a write closure decides.
pub enum Write {
    /// Store this value (create or replace); its resourceVersion is filled in.
    Put(Value),
    /// Remove the object.
    Delete,
    /// Change nothing (no-op update).
    Keep,
}

/// The outcome of a committed write.
#[derive(Debug, Clone)]
pub enum Written {
    /// The object as stored now (Put) or kept unchanged (Keep).
    Stored(Arc<Obj>),
    /// The object was removed; its final state.
    Deleted(Arc<Obj>),
}

/// The watch history start was passed: the requested resourceVersion is too old.
#[derive(Debug, Clone, Copy)]
pub struct TooOld {
    /// The oldest resourceVersion a watch can still start from.
    pub oldest: u64,
}

struct Inner {
    objects: BTreeMap<(String, String), Arc<Obj>>,
}

struct History {
    events: VecDeque<Arc<Event>>,
    oldest: u64,
    /// Bytes of all events ever pushed (their lines' lengths).
    total: u64,
}

/// The length of an event's line: `{"type":"MODIFIED","object":` + object + `}\n`.
fn line_len(kind: EventType, obj: &Obj) -> u64 {
    (obj.bytes.len() + kind.as_str().len() + 22) as u64
}

/// The objects of one resource (all its versions and shapes).
pub struct Table {
    key: String,
    inner: Mutex<Inner>,
    history: RwLock<History>,
    changed: watch::Sender<u64>,
    /// Set once the table is dropped (its CRD deleted): its watches end.
    dropped: AtomicBool,
    counter: Arc<AtomicU64>,
    strip_type: bool,
    cap: usize,
    lag_limit: u64,
    log: Option<Arc<Log>>,
}

impl Table {
    /// The storage key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// One object.
    pub fn get(&self, ns: &str, name: &str) -> Option<Arc<Obj>> {
        self.inner.lock().objects.get(&(ns.to_string(), name.to_string())).cloned()
    }

    /// A consistent snapshot of the objects (of one namespace, or all) and the list's resourceVersion.
    pub fn list(&self, ns: Option<&str>) -> (Vec<Arc<Obj>>, u64) {
        let inner = self.inner.lock();
        let items = match ns {
            None => inner.objects.values().cloned().collect(),
            Some(ns) => {
                inner.objects.range((ns.to_string(), String::new())..).take_while(|((n, _), _)| n == ns).map(|(_, o)| o.clone()).collect()
            }
        };
        (items, self.counter.load(Ordering::SeqCst))
    }

    /// Visits the objects (of one namespace, or all) in key order, starting after the key
    /// `after` when given, under the table's lock, until `visit` returns false; returns the
    /// table's resourceVersion. A page of a list costs the objects it visits, not a copy of
    /// the whole table (a listing of 100,000 objects in pages of 500 copied every object for
    /// every page).
    pub fn scan(&self, ns: Option<&str>, after: Option<(&str, &str)>, mut visit: impl FnMut(&Arc<Obj>) -> bool) -> u64 {
        use std::ops::Bound;
        let inner = self.inner.lock();
        let start = match (after, ns) {
            (Some((a_ns, a_name)), _) if ns.is_none_or(|ns| a_ns >= ns) => Bound::Excluded((a_ns.to_string(), a_name.to_string())),
            (_, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (_, None) => Bound::Unbounded,
        };
        for ((obj_ns, _), obj) in inner.objects.range((start, Bound::Unbounded)) {
            if ns.is_some_and(|ns| obj_ns != ns) || !visit(obj) {
                break;
            }
        }
        self.counter.load(Ordering::SeqCst)
    }

    /// Number of objects (of one namespace, or all).
    pub fn count(&self, ns: Option<&str>) -> usize {
        let inner = self.inner.lock();
        match ns {
            None => inner.objects.len(),
            Some(ns) => inner.objects.range((ns.to_string(), String::new())..).take_while(|((n, _), _)| n == ns).count(),
        }
    }

    /// Apply `f` to the current object and commit what it decides, atomically, as the real
    /// server's `GuaranteedUpdate`: `f` and the serialization of what it decides run outside
    /// the table lock (so a slow patch delays no reader and no writer of another object), and
    /// run again if the object changed before the commit. Under the lock: the pointer check, the
    /// resourceVersion, one copy of the prepared bytes, the insert and the event.
    pub fn write<R>(
        &self,
        ns: &str,
        name: &str,
        mut f: impl FnMut(Option<&Arc<Obj>>) -> ApiResult<(Write, R)>,
    ) -> ApiResult<(Option<Written>, R)> {
        let key = (ns.to_string(), name.to_string());
        let (mut inner, current, prepared, extra) = loop {
            let seen = self.inner.lock().objects.get(&key).cloned();
            let (decision, extra) = f(seen.as_ref())?;
            let prepared = match decision {
                Write::Keep => Prepared::Keep,
                Write::Put(value) => {
                    // A patch may deepen an object beyond what bodies may be: refused before
                    // anything walks it recursively.
                    if crate::depth::of_value(&value) > crate::depth::MAX_DEPTH {
                        return Err(crate::status::ApiError::too_deep());
                    }
                    let (value, encoded) = Encoded::new(value);
                    if encoded.len() > MAX_OBJECT_BYTES {
                        return Err(crate::status::ApiError::object_too_large());
                    }
                    Prepared::Put(value, encoded)
                }
                // the final state of the object, at the deletion's version
                Write::Delete => match &seen {
                    None => Prepared::Keep,
                    Some(prev) => {
                        let (value, encoded) = Encoded::new(prev.value.clone());
                        Prepared::Delete(value, encoded)
                    }
                },
            };
            let inner = self.inner.lock();
            let now = inner.objects.get(&key);
            let same = match (now, seen.as_ref()) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            };
            if same {
                break (inner, seen, prepared, extra);
            }
        };
        let changed = !matches!(prepared, Prepared::Keep);
        let written = match prepared {
            Prepared::Keep => current.map(Written::Stored),
            Prepared::Put(value, encoded) => {
                let rv = self.counter.fetch_add(1, Ordering::SeqCst) + 1;
                let obj = encoded.into_obj(value, rv, self.strip_type);
                inner.objects.insert(key, obj.clone());
                let kind = if current.is_some() { EventType::Modified } else { EventType::Added };
                self.push(&mut inner, rv, kind, obj.clone(), current);
                Some(Written::Stored(obj))
            }
            Prepared::Delete(value, encoded) => {
                let prev = inner.objects.remove(&key);
                let rv = self.counter.fetch_add(1, Ordering::SeqCst) + 1;
                let obj = encoded.into_obj(value, rv, self.strip_type);
                self.push(&mut inner, rv, EventType::Deleted, obj.clone(), prev);
                Some(Written::Deleted(obj))
            }
        };
        drop(inner);
        // Logged after the table lock is released (the log keeps, per object, the record of the
        // highest version, whatever the order of appends) and flushed before the answer:
        // concurrent writers share one flush.
        if let (Some(log), Some(w), true) = (&self.log, &written, changed) {
            let ticket = match w {
                Written::Stored(obj) => log.append(&self.key, ns, name, obj.rv, Some(&obj.bytes[..])),
                Written::Deleted(obj) => log.append(&self.key, ns, name, obj.rv, None),
            };
            log.sync(ticket);
        }
        Ok((written, extra))
    }

    fn push(&self, _inner: &mut Inner, rv: u64, kind: EventType, obj: Arc<Obj>, prev: Option<Arc<Obj>>) {
        let dropped = {
            let mut h = self.history.write();
            let size = line_len(kind, &obj);
            let event = Arc::new(Event { rv, kind, obj, prev, start: h.total, line: OnceLock::new() });
            h.total += size;
            h.events.push_back(event);
            let mut dropped = Vec::new();
            while h.events.len() > self.cap {
                if let Some(old) = h.events.pop_front() {
                    h.oldest = old.rv;
                    dropped.push(old);
                }
            }
            dropped
        };
        drop(dropped);
        self.changed.send_replace(rv);
    }

    /// Events after `rv`, as many as fit in `budget` bytes of lines (at least one), or
    /// `TooOld` if history no longer reaches back to it.
    pub fn events_after(&self, rv: u64, budget: u64) -> Result<Vec<Arc<Event>>, TooOld> {
        let h = self.history.read();
        if rv < h.oldest {
            return Err(TooOld { oldest: h.oldest });
        }
        let start = h.events.partition_point(|e| e.rv <= rv);
        let Some(first) = h.events.get(start) else { return Ok(Vec::new()) };
        let until = first.start.saturating_add(budget.max(1));
        Ok(h.events.range(start..).take_while(|e| e.start < until).cloned().collect())
    }

    /// How many bytes of event lines the history holds after `rv`: how far behind a watcher
    /// at `rv` is.
    pub fn behind(&self, rv: u64) -> u64 {
        let h = self.history.read();
        let start = h.events.partition_point(|e| e.rv <= rv);
        h.events.get(start).map_or(0, |e| h.total - e.start)
    }

    /// A watcher this many bytes of events behind is ended (see [`Store::new`]).
    pub fn lag_limit(&self) -> u64 {
        self.lag_limit
    }

    /// Whether the table was dropped: watches on it end.
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::SeqCst)
    }

    /// A receiver that changes whenever the table changes (and when it is dropped).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The resourceVersion a bookmark may carry now (every change of this table up to it was sent
    /// to a watcher that has drained `events_after`).
    pub fn current_rv(&self) -> u64 {
        let _inner = self.inner.lock();
        self.counter.load(Ordering::SeqCst)
    }

    /// Insert an object as loaded from disk (no event, rv kept).
    pub fn load(&self, value: Value) {
        let rv = rv_of(&value);
        let key = (crate::registry::namespace_of(&value).to_string(), crate::registry::name_of(&value).to_string());
        let obj = Obj::new(value, rv, self.strip_type);
        self.inner.lock().objects.insert(key, obj);
    }
}

/// The length of `value` serialized as JSON, without keeping the bytes.
pub fn encoded_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// `metadata.resourceVersion` as a number (0 if absent or not a number).
pub fn rv_of(value: &Value) -> u64 {
    value.get("metadata").and_then(|v| v.get("resourceVersion")).and_then(Value::as_str).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Write `metadata.resourceVersion`.
pub fn set_rv(value: &mut Value, rv: u64) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// All tables and the cluster-wide resourceVersion counter.
pub struct Store {
    counter: Arc<AtomicU64>,
    tables: RwLock<HashMap<String, Arc<Table>>>,
    cap: usize,
    lag_limit: u64,
    log: Option<Arc<Log>>,
}

/// A watcher that falls this many bytes of events behind is ended, unless set otherwise.
pub const WATCH_LAG_LIMIT: u64 = 64 * 1024 * 1024;

impl Store {
    /// An empty store starting at resourceVersion `start`, keeping `cap` events per table.
    pub fn new(start: u64, cap: usize, log: Option<Arc<Log>>) -> Self {
        Store { counter: Arc::new(AtomicU64::new(start)), tables: RwLock::default(), cap, lag_limit: WATCH_LAG_LIMIT, log }
    }

    /// End watchers that fall `bytes` of events behind (the real server's cacher ends a
    /// watcher whose buffer stays full; its client watches again from where it was).
    pub fn with_watch_lag_limit(mut self, bytes: u64) -> Self {
        self.lag_limit = bytes.max(1);
        self
    }

    /// The table stored under `key`, created on first use.
    pub fn table(&self, key: &str, builtin: bool) -> Arc<Table> {
        self.table_if(key, builtin, || true)
    }

    /// The table stored under `key`; created on first use only if `served()` says the resource
    /// is still served, else a detached table that is already dropped. `served` is asked under
    /// the store's lock, which [`Store::drop_table`] takes too: a request that looked its
    /// resource up before the resource went (a deleted CRD) cannot bring the table back, and a
    /// watch it opens ends at once.
    pub fn table_if(&self, key: &str, builtin: bool, served: impl FnOnce() -> bool) -> Arc<Table> {
        if let Some(t) = self.tables.read().get(key) {
            return t.clone();
        }
        let mut tables = self.tables.write();
        if let Some(t) = tables.get(key) {
            return t.clone();
        }
        let table = self.new_table(key, builtin);
        if !served() {
            table.dropped.store(true, Ordering::SeqCst);
            return table;
        }
        tables.insert(key.to_string(), table.clone());
        table
    }

    fn new_table(&self, key: &str, builtin: bool) -> Arc<Table> {
        let rv = self.counter.load(Ordering::SeqCst);
        Arc::new(Table {
            key: key.to_string(),
            inner: Mutex::new(Inner { objects: BTreeMap::new() }),
            history: RwLock::new(History { events: VecDeque::new(), oldest: rv, total: 0 }),
            changed: watch::channel(rv).0,
            dropped: AtomicBool::new(false),
            counter: self.counter.clone(),
            strip_type: builtin,
            cap: self.cap,
            lag_limit: self.lag_limit,
            log: self.log.clone(),
        })
    }

    /// Forget a table (after its objects were deleted) and end its watches, as a real API
    /// server tears down the storage of a deleted CRD and with it the watches on it.
    pub fn drop_table(&self, key: &str) {
        if let Some(t) = self.tables.write().remove(key) {
            t.dropped.store(true, Ordering::SeqCst);
            t.changed.send_modify(|_| {});
        }
    }

    /// The last resourceVersion handed out.
    pub fn current_rv(&self) -> u64 {
        self.counter.load(Ordering::SeqCst)
    }

    /// Rewrite the persistence log with only the live objects, if it has grown enough (or
    /// `force`). Every table is locked meanwhile, so writes wait but none is lost.
    pub fn compact_log(&self, force: bool) {
        let Some(log) = &self.log else { return };
        if !force && !log.wants_compaction() {
            return;
        }
        let tables = self.tables.write();
        let mut sorted: Vec<&Arc<Table>> = tables.values().collect();
        sorted.sort_by(|a, b| a.key.cmp(&b.key));
        let guards: Vec<_> = sorted.iter().map(|t| (t.key.as_str(), t.inner.lock())).collect();
        let rv = self.counter.load(Ordering::SeqCst);
        let objects =
            guards.iter().flat_map(|(key, g)| g.objects.iter().map(move |((ns, n), o)| (*key, ns.as_str(), n.as_str(), &o.bytes[..])));
        if let Err(e) = log.compact(rv, objects) {
            tracing::error!("cannot compact the data directory: {e}");
        }
    }

    /// Whether writes are persisted (and wait for the disk).
    pub fn persistent(&self) -> bool {
        self.log.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_items_of_builtins_leave_out_kind_and_api_version() {
        let obj = Obj::new(json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}}), 1, true);
        let mut out = BytesMut::new();
        obj.write_item(&mut out);
        assert_eq!(&out[..], br#"{"metadata":{"name":"a"}}"#);
    }

    #[test]
    fn writes_take_increasing_resource_versions_and_fill_the_history() {
        let store = Store::new(10, 2, None);
        let t = store.table("/configmaps", true);
        for i in 0..3 {
            t.write("ns", &format!("c{i}"), |_| Ok((Write::Put(json!({"metadata": {}})), ()))).unwrap();
        }
        assert_eq!(store.current_rv(), 13);
        assert!(t.events_after(10, u64::MAX).is_err(), "history keeps only 2 events");
        let evs = t.events_after(11, u64::MAX).unwrap();
        assert_eq!(evs.iter().map(|e| e.rv).collect::<Vec<_>>(), vec![12, 13]);
        // a budget of one line gives one event, of none still one
        let sizes: Vec<u64> = evs.iter().map(|e| line_len(e.kind, &e.obj)).collect();
        assert_eq!(sizes, evs.iter().map(|e| e.line().len() as u64).collect::<Vec<_>>());
        let one = sizes[0];
        assert_eq!(t.events_after(11, one).unwrap().len(), 1);
        assert_eq!(t.events_after(11, 0).unwrap().len(), 1);
        assert_eq!(t.events_after(11, one + 1).unwrap().len(), 2);
        assert_eq!((t.behind(11), t.behind(12), t.behind(13)), (sizes[0] + sizes[1], sizes[1], 0));
    }

    #[test]
    fn an_object_serialized_before_its_version_is_known_reads_as_one_serialized_after() {
        let cases = [
            json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a", "resourceVersion": "3", "uid": "u"}, "data": {"k": "\"v\""}}),
            json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "b"}, "spec": {"x": [1, 2.5, null, true]}}),
            json!({"metadata": {}}),
            json!({"no": "metadata"}),
            json!({"metadata": "not an object"}),
        ];
        for value in cases {
            let (kept, encoded) = Encoded::new(value.clone());
            let obj = encoded.into_obj(kept, 42, true);
            let mut want = value.clone();
            set_rv(&mut want, 42);
            assert_eq!(obj.bytes, Bytes::from(serde_json::to_vec(&want).unwrap()), "{value}");
            assert_eq!(obj.value, want);
            assert_eq!(obj.type_prefix, Obj::new(want, 42, true).type_prefix);
        }
    }

    #[test]
    fn a_slow_write_holds_no_lock_readers_and_other_writers_need() {
        let store = Store::new(0, 10, None);
        let t = store.table("/configmaps", true);
        t.write("ns", "other", |_| Ok((Write::Put(json!({"metadata": {"name": "other"}})), ()))).unwrap();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let slow = {
            let t = t.clone();
            std::thread::spawn(move || {
                t.write("ns", "slow", |_| {
                    let _ = started_tx.send(());
                    let _ = release_rx.recv_timeout(std::time::Duration::from_secs(10));
                    Ok((Write::Put(json!({"metadata": {"name": "slow"}})), ()))
                })
            })
        };
        started_rx.recv().unwrap();
        // while the slow write computes, another object is read and written
        assert!(t.get("ns", "other").is_some());
        t.write("ns", "other", |_| Ok((Write::Put(json!({"metadata": {"name": "other", "labels": {"a": "b"}}})), ()))).unwrap();
        release_tx.send(()).unwrap();
        slow.join().unwrap().unwrap();
        assert_eq!(t.get("ns", "slow").map(|o| o.rv), Some(3));
    }

    #[test]
    fn a_keep_decision_changes_nothing() {
        let store = Store::new(0, 10, None);
        let t = store.table("/configmaps", true);
        t.write("ns", "a", |_| Ok((Write::Put(json!({"metadata": {}})), ()))).unwrap();
        let (w, _) = t.write("ns", "a", |_| Ok((Write::Keep, ()))).unwrap();
        let Some(Written::Stored(obj)) = w else { panic!("kept object") };
        assert_eq!(obj.rv, 1);
        assert_eq!(store.current_rv(), 1);
    }
}
