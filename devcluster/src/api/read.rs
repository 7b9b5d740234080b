//! GET, LIST and WATCH. Lists are assembled from the cached bytes of each object; watches
//! are a small state machine over the table's event history (initial objects, then events
//! after a cursor, bookmarks, timeout), sending each event line shared by all watchers.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, header};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::negotiate::{Shape, partial};
use super::request::{Ctx, Target};
use super::respond::{bytes_response, error, json_response};
use super::table;
use crate::builtin;
use crate::cluster::Cluster;
use crate::registry::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{Event, EventType, Obj, Table, encode_event};

/// The bytes of a stored object as the endpoint serves it (Event shapes converted).
pub fn object_bytes(info: &ResourceInfo, obj: &Obj) -> Bytes {
    if info.is_events_v1() {
        return Bytes::from(serde_json::to_vec(&builtin::event_from_core(&obj.value)).unwrap_or_default());
    }
    obj.bytes.clone()
}

/// GET one object.
pub fn get(cluster: &Cluster, t: &Target, ctx: &Ctx) -> Response {
    let name = t.name.as_deref().unwrap_or("");
    let ns = t.namespace.as_deref().unwrap_or("");
    match cluster.table(&t.info).get(ns, name) {
        None => error(&ApiError::not_found(&t.info, name)),
        Some(obj) if ctx.wants_table() => {
            let rv = obj.rv.to_string();
            json_response(200, &table::render(&t.info, &[obj], &rv, ctx.q("includeObject"), None), &[])
        }
        Some(obj) => bytes_response(200, object_bytes(&t.info, &obj), &[]),
    }
}

fn selectors(info: &ResourceInfo, ctx: &Ctx) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(ctx.q("labelSelector").unwrap_or("")).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let fields = FieldSelector::parse(ctx.q("fieldSelector").unwrap_or(""), info.field_selectors()).map_err(|e| {
        if info.builtin {
            ApiError::bad_request(e.to_string())
        } else {
            let text = ctx.q("fieldSelector").unwrap_or("");
            let field = text
                .split(',')
                .map(|t| t.split(['=', '!']).next().unwrap_or("").trim())
                .find(|f| *f != "metadata.name" && *f != "metadata.namespace")
                .unwrap_or("");
            ApiError::bad_request(format!("field label not supported: {field}"))
        }
    })?;
    Ok((labels, fields))
}

fn matches(info: &ResourceInfo, labels: &LabelSelector, fields: &FieldSelector, obj: &Obj) -> bool {
    if !labels.is_empty() && !labels.matches(obj.value.get("metadata").and_then(|v| v.get("labels"))) {
        return false;
    }
    if fields.is_empty() {
        return true;
    }
    if info.is_events_v1() {
        return fields.matches(&builtin::event_from_core(&obj.value));
    }
    fields.matches(&obj.value)
}

/// LIST objects.
pub fn list(cluster: &Cluster, t: &Target, ctx: &Ctx) -> Response {
    let (labels, fields) = match selectors(&t.info, ctx) {
        Ok(s) => s,
        Err(e) => return error(&e),
    };
    let info = &t.info;
    if ctx.q("resourceVersionMatch").is_some_and(|m| !m.is_empty()) && ctx.q("resourceVersion").is_none_or(str::is_empty) {
        return error(&ApiError::invalid(
            "ListOptions.meta.k8s.io",
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::status::Cause::new(
                "FieldValueForbidden",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                "resourceVersionMatch",
            )],
        ));
    }
    let table = cluster.table(info);
    let mut start_after: Option<(String, String)> = None;
    let mut list_rv = None;
    if let Some(token) = ctx.q("continue").filter(|c| !c.is_empty()) {
        match decode_continue(token) {
            Some((r, ns, name)) => {
                list_rv = Some(r);
                start_after = Some((ns, name));
            }
            None => {
                return error(&ApiError::bad_request("invalid continue token: continue key is not valid"));
            }
        }
    }
    let limit = ctx.q("limit").and_then(|l| l.parse::<usize>().ok()).filter(|l| *l > 0);
    let filtered_selectors = !labels.is_empty() || !fields.is_empty();
    let mut selected: Vec<Arc<Obj>> = Vec::new();
    let mut more = false;
    let mut remaining = 0usize;
    let after = start_after.as_ref().map(|(ns, name)| (ns.as_str(), name.as_str()));
    let rv = table.scan(t.namespace.as_deref(), after, |obj| {
        if !matches(info, &labels, &fields, obj) {
            return true;
        }
        if limit.is_some_and(|l| selected.len() >= l) {
            more = true;
            remaining += 1;
            // With selectors the rest is not counted (the real server gives no count then).
            return !filtered_selectors;
        }
        selected.push(obj.clone());
        true
    });
    let list_rv = list_rv.unwrap_or(rv);
    let cont = if more { selected.last().map(|o| encode_continue(list_rv, o.namespace(), o.name())) } else { None };
    if ctx.wants_table() {
        return json_response(200, &table::render(info, &selected, &list_rv.to_string(), ctx.q("includeObject"), cont.as_deref()), &[]);
    }
    let mut out = BytesMut::with_capacity(selected.iter().map(|o| o.bytes.len() + 1).sum::<usize>() + 256);
    out.put_slice(b"{\"kind\":");
    out.put_slice(&serde_json::to_vec(&info.list_kind()).unwrap_or_default());
    out.put_slice(b",\"apiVersion\":");
    out.put_slice(&serde_json::to_vec(&info.api_version()).unwrap_or_default());
    out.put_slice(b",\"metadata\":{\"resourceVersion\":\"");
    out.put_slice(list_rv.to_string().as_bytes());
    out.put_u8(b'"');
    match &cont {
        Some(c) => {
            out.put_slice(b",\"continue\":\"");
            out.put_slice(c.as_bytes());
            out.put_u8(b'"');
            if !filtered_selectors {
                out.put_slice(format!(",\"remainingItemCount\":{remaining}").as_bytes());
            }
        }
        None if !info.builtin => out.put_slice(b",\"continue\":\"\""),
        None => {}
    }
    out.put_slice(b"},\"items\":[");
    for (i, obj) in selected.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        if info.is_events_v1() {
            let mut v = builtin::event_from_core(&obj.value);
            if let Some(m) = v.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            out.put_slice(&serde_json::to_vec(&v).unwrap_or_default());
        } else {
            obj.write_item(&mut out);
        }
    }
    out.put_slice(b"]}");
    bytes_response(200, out.freeze(), &[])
}

fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    let raw = serde_json::to_vec(&json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{ns}/{name}")})).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE.encode(raw)
}

fn decode_continue(token: &str) -> Option<(u64, String, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE.decode(token).ok()?;
    let v: Value = serde_json::from_slice(&raw).ok()?;
    let rv = v["rv"].as_u64()?;
    let (ns, name) = v["start"].as_str()?.split_once('/')?;
    Some((rv, ns.to_string(), name.to_string()))
}

/// A running watch.
struct Watcher {
    info: Arc<ResourceInfo>,
    table: Arc<Table>,
    rx: watch::Receiver<u64>,
    cursor: u64,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    pending: VecDeque<Bytes>,
    deadline: Instant,
    bookmarks: bool,
    next_bookmark: Instant,
    /// The shape of each event's object (as stored, a Table row, PartialObjectMetadata).
    shape: Shape,
    table_header_sent: bool,
    done: bool,
    last_send: Instant,
    stopping: watch::Receiver<bool>,
}

const BOOKMARK_EVERY: Duration = Duration::from_secs(1);
/// Under load a watcher sends at most one chunk per this interval, batching the events
/// in between: one write per watcher instead of one per event keeps a wide fan-out cheap.
const BATCH_WINDOW: Duration = Duration::from_millis(5);

/// WATCH a collection.
pub fn watch(cluster: &Cluster, t: &Target, ctx: &Ctx) -> Response {
    let (labels, fields) = match selectors(&t.info, ctx) {
        Ok(s) => s,
        Err(e) => return error(&e),
    };
    let rv_param = ctx.q("resourceVersion").filter(|r| !r.is_empty());
    let rv = match rv_param.map(str::parse::<u64>) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(_)) => {
            let r = rv_param.unwrap_or("");
            return error(&ApiError::internal(format!(
                "resourceVersion: Invalid value: \"{r}\": strconv.ParseUint: parsing \"{r}\": invalid syntax"
            )));
        }
    };
    let timeout = match watch_timeout(ctx.q("timeoutSeconds")) {
        Ok(t) => t,
        Err(e) => return error(&e),
    };
    let bookmarks = ctx.flag("allowWatchBookmarks");
    let initial = ctx.flag("sendInitialEvents");
    let table = cluster.table(&t.info);
    let rx = table.subscribe();
    let now = Instant::now();
    let mut w = Watcher {
        info: t.info.clone(),
        table: table.clone(),
        rx,
        cursor: 0,
        namespace: t.namespace.clone(),
        labels,
        fields,
        pending: VecDeque::new(),
        deadline: deadline_after(now, timeout),
        bookmarks,
        next_bookmark: now + BOOKMARK_EVERY,
        shape: ctx.shape(),
        table_header_sent: false,
        done: false,
        last_send: now,
        stopping: cluster.stopping.subscribe(),
    };
    if initial || rv.is_none_or(|r| r == 0) {
        let (items, snap_rv) = table.list(t.namespace.as_deref());
        let mut frames = Frames::default();
        for obj in &items {
            if matches(&w.info, &w.labels, &w.fields, obj) {
                w.emit(&mut frames, "ADDED", obj, None);
            }
        }
        w.cursor = snap_rv;
        if initial && bookmarks {
            frames.line(w.bookmark(snap_rv, true));
        }
        w.pending.extend(frames.into_frames());
    } else if let Some(r) = rv {
        w.cursor = r;
    }
    let stream = futures::stream::unfold(w, |mut w| async move {
        let chunk = w.next().await?;
        Some((Ok::<Bytes, std::io::Error>(chunk), w))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    resp
}

/// Lines at least this long go out as frames of their own, the object's bytes shared with the
/// store and every other watcher; shorter ones are copied into one chunk (one write for many).
const SHARE_FROM: usize = 16 * 1024;

/// Bytes of history events a watcher takes at a time: what it holds beyond the shared bytes.
const DRAIN_BUDGET: u64 = 1024 * 1024;

/// A watcher's outgoing frames being built.
#[derive(Default)]
struct Frames {
    out: VecDeque<Bytes>,
    chunk: BytesMut,
}

impl Frames {
    /// A whole line (`{"type":..,"object":..}\n`).
    fn line(&mut self, line: Bytes) {
        if line.len() >= SHARE_FROM {
            self.flush();
            self.out.push_back(line);
        } else {
            self.chunk.put_slice(&line);
        }
    }

    /// The line of an event of `kind` for an object's bytes, which a large object keeps shared.
    fn object(&mut self, kind: &'static str, object: &Bytes) {
        let head = match kind {
            "ADDED" => &b"{\"type\":\"ADDED\",\"object\":"[..],
            "MODIFIED" => &b"{\"type\":\"MODIFIED\",\"object\":"[..],
            _ => &b"{\"type\":\"DELETED\",\"object\":"[..],
        };
        if object.len() >= SHARE_FROM {
            self.flush();
            self.out.extend([Bytes::from_static(head), object.clone(), Bytes::from_static(b"}\n")]);
        } else {
            self.chunk.put_slice(head);
            self.chunk.put_slice(object);
            self.chunk.put_slice(b"}\n");
        }
    }

    fn flush(&mut self) {
        if !self.chunk.is_empty() {
            self.out.push_back(self.chunk.split().freeze());
        }
    }

    fn into_frames(mut self) -> VecDeque<Bytes> {
        self.flush();
        self.out
    }
}

impl Watcher {
    /// Add the line of an event of `kind` for `obj` (`shared`: the history's event, whose line
    /// is encoded once for all watchers).
    fn emit(&mut self, frames: &mut Frames, kind: &'static str, obj: &Obj, shared: Option<&Event>) {
        if self.shape != Shape::Object || self.info.is_events_v1() {
            let line = self.encode(kind, obj);
            frames.line(line);
            return;
        }
        match shared {
            Some(ev) if ev.kind.as_str() == kind => frames.line(ev.line()),
            _ => frames.object(kind, &obj.bytes),
        }
    }

    /// The line of an object served in another shape (Table rows, PartialObjectMetadata,
    /// events.k8s.io Events).
    fn encode(&mut self, kind: &str, obj: &Obj) -> Bytes {
        if self.shape == Shape::Table {
            let header = !self.table_header_sent;
            self.table_header_sent = true;
            let mut t = table::render(
                &self.info,
                &[Arc::new(Obj { value: obj.value.clone(), bytes: obj.bytes.clone(), type_prefix: 0, rv: obj.rv })],
                &obj.rv.to_string(),
                None,
                None,
            );
            if !header {
                t["columnDefinitions"] = json!([]);
            }
            return encode_event(kind, &serde_json::to_vec(&t).unwrap_or_default());
        }
        if let Shape::Metadata { version, .. } = self.shape {
            let v = partial(&obj.value, version);
            return encode_event(kind, &serde_json::to_vec(&v).unwrap_or_default());
        }
        let v = builtin::event_from_core(&obj.value);
        encode_event(kind, &serde_json::to_vec(&v).unwrap_or_default())
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": meta});
        let obj = match self.shape {
            Shape::Metadata { version, .. } => partial(&obj, version),
            _ => obj,
        };
        encode_event("BOOKMARK", &serde_json::to_vec(&obj).unwrap_or_default())
    }

    fn in_scope(&self, obj: &Obj) -> bool {
        self.namespace.as_deref().is_none_or(|ns| obj.namespace() == ns)
    }

    fn sel(&self, obj: &Obj) -> bool {
        self.in_scope(obj) && matches(&self.info, &self.labels, &self.fields, obj)
    }

    /// Turn new history events (up to [`DRAIN_BUDGET`] bytes of them) into frames; false if
    /// the watch ends: the history no longer reaches the cursor (410), or the reader fell
    /// further behind than the table's lag limit (a clean end, as the real server ends a
    /// watcher it cannot keep up with).
    fn drain(&mut self) -> bool {
        if self.table.behind(self.cursor) > self.table.lag_limit() {
            self.done = true;
            return false;
        }
        let events = match self.table.events_after(self.cursor, DRAIN_BUDGET) {
            Ok(e) => e,
            Err(too_old) => {
                let status = ApiError::expired(format!("too old resource version: {} ({})", self.cursor, too_old.oldest)).to_status();
                self.pending.push_back(encode_event("ERROR", &serde_json::to_vec(&status).unwrap_or_default()));
                self.done = true;
                return false;
            }
        };
        let mut frames = Frames::default();
        for ev in &events {
            self.cursor = ev.rv;
            let now = self.sel(&ev.obj);
            let before = ev.prev.as_ref().is_some_and(|p| self.sel(p));
            match ev.kind {
                EventType::Added if now => self.emit(&mut frames, "ADDED", &ev.obj, Some(ev)),
                EventType::Modified if now && before => self.emit(&mut frames, "MODIFIED", &ev.obj, Some(ev)),
                EventType::Modified if now => self.emit(&mut frames, "ADDED", &ev.obj, Some(ev)),
                EventType::Modified if before => {
                    let prev = ev.prev.as_ref().expect("previous object");
                    let mut v = prev.value.clone();
                    crate::meta::set_rv(&mut v, ev.rv);
                    let o = Obj::new(v, ev.rv, false);
                    self.emit(&mut frames, "DELETED", &o, None);
                }
                EventType::Deleted if now || before => self.emit(&mut frames, "DELETED", &ev.obj, Some(ev)),
                _ => {}
            }
        }
        self.pending.extend(frames.into_frames());
        true
    }

    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(c) = self.pending.pop_front() {
                self.last_send = Instant::now();
                return Some(c);
            }
            if self.done || Instant::now() >= self.deadline {
                return None;
            }
            if self.table.is_dropped() {
                // The resource is no longer served (its CRD was deleted): send what is left and
                // end the watch, as a real API server does when it tears down the storage.
                self.drain();
                self.done = true;
                continue;
            }
            self.rx.borrow_and_update();
            if !self.drain() {
                continue;
            }
            if !self.pending.is_empty() {
                continue;
            }
            let wake = if self.bookmarks { self.next_bookmark.min(self.deadline) } else { self.deadline };
            enum Wake {
                Stop,
                Changed(bool),
                Timer,
            }
            let woke = tokio::select! {
                _ = self.stopping.wait_for(|s| *s) => Wake::Stop,
                r = self.rx.changed() => Wake::Changed(r.is_ok()),
                _ = tokio::time::sleep_until(wake) => Wake::Timer,
            };
            match woke {
                Wake::Stop | Wake::Changed(false) => self.done = true,
                Wake::Changed(true) => {
                    let since = self.last_send.elapsed();
                    if since < BATCH_WINDOW {
                        tokio::time::sleep(BATCH_WINDOW - since).await;
                    }
                }
                Wake::Timer => {
                    if self.bookmarks && Instant::now() >= self.next_bookmark {
                        self.next_bookmark = Instant::now() + BOOKMARK_EVERY;
                        let rv = self.table.current_rv();
                        if self.drain() && self.pending.is_empty() {
                            self.cursor = self.cursor.max(rv);
                            let b = self.bookmark(rv, false);
                            self.pending.push_back(b);
                        }
                    }
                }
            }
        }
    }
}

/// How long a watch may run, from `timeoutSeconds` (an int64, as the real server reads it):
/// absent or 0 is the server's own limit (30 minutes here), a negative value ends the watch at
/// once, and a value that is not an int64 is a 400, with the conversion's message.
fn watch_timeout(param: Option<&str>) -> Result<Duration, ApiError> {
    let Some(text) = param.filter(|t| !t.is_empty()) else { return Ok(DEFAULT_WATCH_TIMEOUT) };
    match text.parse::<i64>() {
        Ok(0) => Ok(DEFAULT_WATCH_TIMEOUT),
        Ok(secs) => Ok(Duration::from_secs(secs.max(0).unsigned_abs())),
        Err(e) => {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
                _ => "invalid syntax",
            };
            Err(ApiError::bad_request(format!("strconv.ParseInt: parsing {text:?}: {why}")))
        }
    }
}

/// `now + timeout`, clamped where the clock cannot count that far (a timeout of
/// 9,223,372,036,854,775,807 s is "never" in practice, not a panic).
fn deadline_after(now: Instant, timeout: Duration) -> Instant {
    now.checked_add(timeout).or_else(|| now.checked_add(FAR_FUTURE)).unwrap_or(now)
}

/// A watch without a timeout of its own ends after this long.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// "Never", for a deadline: about 30 years.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_objects_go_out_as_the_bytes_every_watcher_shares_and_small_ones_in_one_chunk() {
        let big = Obj::new(json!({"metadata": {"name": "big"}, "data": {"a": "x".repeat(SHARE_FROM)}}), 7, false);
        let small = Obj::new(json!({"metadata": {"name": "small"}}), 8, false);
        let mut frames = Frames::default();
        frames.object("ADDED", &small.bytes);
        frames.object("ADDED", &small.bytes);
        frames.object("MODIFIED", &big.bytes);
        frames.line(Bytes::from_static(b"{\"type\":\"BOOKMARK\"}\n"));
        let out: Vec<Bytes> = frames.into_frames().into();
        assert_eq!(out.len(), 5, "the small ones in one chunk, the big one in three frames, the bookmark");
        assert!(out.iter().any(|f| f.as_ptr() == big.bytes.as_ptr() && f.len() == big.bytes.len()), "shared, not copied");
        let all: Vec<u8> = out.concat();
        let want =
            [encode_event("ADDED", &small.bytes), encode_event("ADDED", &small.bytes), encode_event("MODIFIED", &big.bytes)].concat();
        assert_eq!(&all[..want.len()], &want[..]);
    }

    #[test]
    fn watch_timeouts_are_int64_seconds_clamped_where_the_clock_ends() {
        let cases: [(Option<&str>, Result<Duration, &str>); 7] = [
            (None, Ok(DEFAULT_WATCH_TIMEOUT)),
            (Some(""), Ok(DEFAULT_WATCH_TIMEOUT)),
            (Some("0"), Ok(DEFAULT_WATCH_TIMEOUT)),
            (Some("18"), Ok(Duration::from_secs(18))),
            (Some("-5"), Ok(Duration::ZERO)),
            (Some("9223372036854775807"), Ok(Duration::from_secs(i64::MAX as u64))),
            (Some("18446744073709551615"), Err("strconv.ParseInt: parsing \"18446744073709551615\": value out of range")),
        ];
        for (param, want) in cases {
            let got = watch_timeout(param).map_err(|e| e.message);
            assert_eq!(got, want.map_err(String::from), "{param:?}");
        }
        assert_eq!(watch_timeout(Some("soon")).unwrap_err().message, "strconv.ParseInt: parsing \"soon\": invalid syntax");
        let now = Instant::now();
        assert!(deadline_after(now, Duration::from_secs(i64::MAX as u64)) > now + Duration::from_secs(3600 * 24 * 365));
        assert_eq!(deadline_after(now, Duration::ZERO), now);
    }
}
