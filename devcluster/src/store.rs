//! The object store: one table per stored resource, each behind its own lock, holding every
//! object's parsed JSON and its serialized bytes (so a GET is a lookup and a copy) plus a
//! bounded history of watch events; one cluster-wide resourceVersion counter that only
//! increases. Writes to one table are serialized, so conflict checks and event order are exact.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::sync::watch;

mod encoding;

use crate::meta::rv_of;
use crate::persist::Log;
use crate::status::ApiResult;
use encoding::Encoded;
pub use encoding::{Obj, encode_event, encoded_len};

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

/// A write decided and serialized outside the lock, waiting for its resourceVersion.
enum Prepared {
    Keep,
    Put(Value, Encoded),
    Delete(Value, Encoded),
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
#[path = "store_tests.rs"]
mod tests;
