//! In-memory indices (Kopf's `@kopf.index`): an index handler's results, kept per object in
//! this server, readable by every handler through [`Cause::index`](crate::Cause::index).
//!
//! The controller sends each index handler every watch event of the objects that match its
//! filters, its first listing included, and calls no other handler before the listing is
//! indexed; a deleted object, or one that stops matching, comes with the event type
//! `DELETED` and is dropped from the index. What the handler returns is put under the object:
//! a JSON object puts each of its values under its key; `null` keeps what the object had (so
//! returning nothing indexes nothing new); any other value goes under the key `""` (Kopf's
//! `None` key, for flat collections).
//!
//! Failures follow Kopf (`ErrorsMode::Ignored` is the default for index handlers): an ignored
//! error keeps the object's stale values; a permanent one drops them and excludes the object
//! from this index for good; a temporary one drops them and excludes the object until its
//! delay (or the backoff) has passed, and for good once the handler's retries or timeout run
//! out. Exclusions are forgotten when the object is deleted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_proto::v1 as pb;
use parking_lot::RwLock;
use serde_json::Value;

use crate::ran::Ran;

/// The key Kopf calls `None`: where results that are not JSON objects go.
pub const FLAT: &str = "";

/// One index: keys → the values the objects put there. Cheap to clone; reads see the index
/// as it is at the time of the read.
#[derive(Clone, Default)]
pub struct Index {
    inner: Arc<RwLock<Data>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.to_map()).finish()
    }
}

#[derive(Default)]
struct Data {
    /// key → object → value; a key is removed with its last value.
    by_key: BTreeMap<String, BTreeMap<String, Value>>,
    /// object → its keys.
    by_object: HashMap<String, Vec<String>>,
    /// Objects left out after failures.
    failures: HashMap<String, Failures>,
}

/// How an object failed to be indexed, since its last success.
struct Failures {
    count: u32,
    first: Instant,
    /// Left out until then; `None` for good.
    until: Option<Instant>,
}

impl Index {
    /// The values under `key`, in the order of their objects' uids.
    pub fn get(&self, key: &str) -> Vec<Value> {
        self.inner.read().by_key.get(key).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// Whether any object put a value under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.inner.read().by_key.contains_key(key)
    }

    /// The keys, sorted.
    pub fn keys(&self) -> Vec<String> {
        self.inner.read().by_key.keys().cloned().collect()
    }

    /// How many keys the index has.
    pub fn len(&self) -> usize {
        self.inner.read().by_key.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.read().by_key.is_empty()
    }

    /// The whole index: key → values.
    pub fn to_map(&self) -> BTreeMap<String, Vec<Value>> {
        self.inner.read().by_key.iter().map(|(k, m)| (k.clone(), m.values().cloned().collect())).collect()
    }

    /// Whether the object is left out of the index after failures.
    pub(crate) fn excluded(&self, object: &str, now: Instant) -> bool {
        self.inner.read().failures.get(object).is_some_and(|f| f.until.is_none_or(|t| now < t))
    }

    /// Puts the object's new values in place of its old ones.
    fn replace(&self, object: &str, entries: Vec<(String, Value)>) {
        let mut d = self.inner.write();
        d.remove(object);
        d.failures.remove(object);
        let keys = entries.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        for (k, v) in entries {
            d.by_key.entry(k).or_default().insert(object.to_string(), v);
        }
        if !keys.is_empty() {
            d.by_object.insert(object.to_string(), keys);
        }
    }

    /// Forgets the object's failures.
    fn succeeded(&self, object: &str) {
        self.inner.write().failures.remove(object);
    }

    /// Drops the object (deleted, or no longer matching) and whatever is known of its failures.
    pub(crate) fn forget(&self, object: &str) {
        let mut d = self.inner.write();
        d.remove(object);
        d.failures.remove(object);
    }

    /// Drops the object's values and leaves it out until what `until` says, given how many
    /// times in a row it failed and since when (`None`: for good).
    fn exclude(&self, object: &str, now: Instant, until: impl FnOnce(u32, Instant) -> Option<Instant>) {
        let mut d = self.inner.write();
        d.remove(object);
        let f = d.failures.entry(object.to_string()).or_insert(Failures { count: 0, first: now, until: None });
        f.count += 1;
        f.until = until(f.count, f.first);
    }
}

impl Data {
    fn remove(&mut self, object: &str) {
        for k in self.by_object.remove(object).unwrap_or_default() {
            if let Some(m) = self.by_key.get_mut(&k) {
                m.remove(object);
                if m.is_empty() {
                    self.by_key.remove(&k);
                }
            }
        }
    }
}

/// The indices of one server, by handler id.
#[derive(Clone, Default)]
pub(crate) struct Indices {
    by_id: Arc<HashMap<String, Index>>,
}

impl std::fmt::Debug for Indices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_id.keys()).finish()
    }
}

impl Indices {
    /// Empty indices for these handler ids.
    pub(crate) fn new<'a>(ids: impl Iterator<Item = &'a str>) -> Indices {
        Indices { by_id: Arc::new(ids.map(|id| (id.to_string(), Index::default())).collect()) }
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Index> {
        self.by_id.get(id)
    }

    /// Whether the server has no index handlers.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// The object an index keeps values under: its uid, else `namespace/name`.
pub(crate) fn object_key(body: &Value) -> String {
    let m = &body["metadata"];
    match m["uid"].as_str().filter(|u| !u.is_empty()) {
        Some(uid) => uid.to_string(),
        None => format!("{}/{}", m["namespace"].as_str().unwrap_or(""), m["name"].as_str().unwrap_or("")),
    }
}

/// What a handler's result puts in the index; `None` keeps what is there.
fn entries(result: &[u8]) -> Result<Option<Vec<(String, Value)>>, String> {
    if result.is_empty() {
        return Ok(None);
    }
    match serde_json::from_slice::<Value>(result) {
        Ok(Value::Null) => Ok(None),
        Ok(Value::Object(m)) => Ok(Some(m.into_iter().collect())),
        Ok(other) => Ok(Some(vec![(FLAT.to_string(), other)])),
        Err(e) => Err(format!("the index handler's result is not JSON: {e}")),
    }
}

/// Applies one run of an index handler to its index, Kopf's way; returns the outcome to report.
pub(crate) fn apply(index: &Index, options: &pb::HandlerOptions, object: &str, ran: Ran, now: Instant) -> Ran {
    let backoff = Duration::try_from_secs_f64(options.backoff_seconds.unwrap_or(60.0)).unwrap_or(Duration::from_secs(60));
    let out_of_tries = |count: u32, first: Instant| {
        options.retries.is_some_and(|r| count >= r)
            || options.timeout_seconds.and_then(|t| Duration::try_from_secs_f64(t).ok()).is_some_and(|t| now.duration_since(first) >= t)
    };
    let temporary = |delay: Duration| move |count, first| (!out_of_tries(count, first)).then(|| now + delay);
    match ran.outcome {
        pb::Outcome::Success => match entries(&ran.result) {
            Ok(None) => index.succeeded(object),
            Ok(Some(e)) => index.replace(object, e),
            Err(message) => return Ran { outcome: pb::Outcome::UnexpectedError, message, ..ran },
        },
        pb::Outcome::TemporaryError => {
            let delay = ran.delay_seconds.and_then(|d| Duration::try_from_secs_f64(d).ok()).unwrap_or(backoff);
            index.exclude(object, now, temporary(delay));
        }
        pb::Outcome::PermanentError => index.exclude(object, now, |_, _| None),
        pb::Outcome::UnexpectedError => match pb::ErrorsMode::try_from(options.errors).unwrap_or_default() {
            pb::ErrorsMode::Ignored => {}
            pb::ErrorsMode::Permanent => index.exclude(object, now, |_, _| None),
            pb::ErrorsMode::Temporary => index.exclude(object, now, temporary(backoff)),
        },
        pb::Outcome::Skipped => {}
    }
    Ran { result: Vec::new(), ..ran }
}

/// Whether the call drops the object instead of indexing it.
pub(crate) fn is_drop(request: &pb::HandleRequest) -> bool {
    request.event_type == "DELETED"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ran(outcome: pb::Outcome, result: Value) -> Ran {
        Ran {
            outcome,
            message: String::new(),
            delay_seconds: None,
            result: if result.is_null() { Vec::new() } else { serde_json::to_vec(&result).unwrap() },
            code: 0,
        }
    }

    #[test]
    fn results_are_merged_per_key_and_replaced_per_object() {
        let index = Index::default();
        let now = Instant::now();
        let o = pb::HandlerOptions::default();
        let ok = |r: Value| ran(pb::Outcome::Success, r);
        apply(&index, &o, "a", ok(json!({"key1": "valueA"})), now);
        apply(&index, &o, "b", ok(json!({"key1": "valueB"})), now);
        apply(&index, &o, "c", ok(json!({"key2": {"key3": "valueC"}})), now);
        apply(&index, &o, "d", ok(json!("flat")), now);
        assert_eq!(
            index.to_map(),
            BTreeMap::from([
                ("".to_string(), vec![json!("flat")]),
                ("key1".to_string(), vec![json!("valueA"), json!("valueB")]),
                ("key2".to_string(), vec![json!({"key3": "valueC"})]),
            ])
        );
        apply(&index, &o, "a", ok(Value::Null), now);
        assert_eq!(index.get("key1").len(), 2, "null keeps what the object had");
        apply(&index, &o, "a", ok(json!({"key2": 1})), now);
        assert_eq!((index.get("key1"), index.get("key2").len()), (vec![json!("valueB")], 2));
        index.forget("b");
        index.forget("d");
        assert!(!index.contains_key("key1") && !index.contains_key(FLAT), "empty keys go: {index:?}");
    }

    #[test]
    fn failures_follow_kopf() {
        let now = Instant::now();
        let later = |s| now + Duration::from_secs(s);
        let fail = |outcome, delay: Option<f64>| Ran { delay_seconds: delay, message: "boom".into(), ..ran(outcome, Value::Null) };
        let opts = |errors: pb::ErrorsMode, retries: Option<u32>| pb::HandlerOptions {
            errors: errors as i32,
            retries,
            backoff_seconds: Some(10.0),
            ..Default::default()
        };
        use pb::ErrorsMode::*;
        use pb::Outcome::*;
        // (options, failure, kept after it, excluded at +5 s, excluded at +20 s)
        let cases = [
            (opts(Ignored, None), fail(UnexpectedError, None), true, false, false),
            (opts(Permanent, None), fail(UnexpectedError, None), false, true, true),
            (opts(Temporary, None), fail(UnexpectedError, None), false, true, false),
            (opts(Ignored, None), fail(PermanentError, None), false, true, true),
            (opts(Ignored, None), fail(TemporaryError, Some(30.0)), false, true, true),
            (opts(Ignored, None), fail(TemporaryError, None), false, true, false),
            (opts(Ignored, Some(1)), fail(TemporaryError, None), false, true, true),
        ];
        for (i, (o, failure, kept, at5, at20)) in cases.into_iter().enumerate() {
            let index = Index::default();
            apply(&index, &o, "a", ran(Success, json!({"k": "v"})), now);
            let reported = apply(&index, &o, "a", failure, now);
            assert_eq!(reported.message, "boom", "case {i}");
            assert_eq!(index.contains_key("k"), kept, "case {i}");
            assert_eq!((index.excluded("a", later(5)), index.excluded("a", later(20))), (at5, at20), "case {i}");
        }
    }

    #[test]
    fn objects_are_keyed_by_uid_or_name() {
        assert_eq!(object_key(&json!({"metadata": {"uid": "u1", "name": "n"}})), "u1");
        assert_eq!(object_key(&json!({"metadata": {"namespace": "ns", "name": "n"}})), "ns/n");
    }
}
