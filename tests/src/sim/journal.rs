//! What happened in one simulated run, in virtual time, and the invariants checked on it.
//!
//! The handler servers write a [`Span`] for every handler call and daemon, server side: it
//! starts when the call reaches the server and ends when the server's future completes or is
//! dropped (a cancelled or severed call ends there; a daemon ends after its exit lag, the time
//! a real daemon takes to notice its cancellation). The world writes notes (faults, kills,
//! restarts, object operations) and the replicas' log lines, so that a violation can be shown
//! with what happened around it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// What a span is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// A handler call (create, update, delete, timer), by handler id.
    Call(String),
    /// A daemon, from its stream's start to its real end.
    Daemon,
}

/// One handler call or daemon on one replica's handler server.
#[derive(Debug, Clone)]
pub struct Span {
    /// The replica incarnation (`r1.2`: replica 1, third start).
    pub replica: String,
    /// The object's uid.
    pub uid: String,
    /// The object's name.
    pub name: String,
    /// Call or daemon.
    pub what: What,
    /// Start, since the run's origin.
    pub start: Duration,
    /// End, since the run's origin (none: still running).
    pub end: Option<Duration>,
    /// Whether it completed with success (calls).
    pub succeeded: bool,
    /// Whether the object was already gone from the store when it started.
    pub after_gone: bool,
}

/// A line of the run's story.
#[derive(Debug, Clone)]
pub struct Note {
    /// When, since the origin.
    pub at: Duration,
    /// Who (`world`, or a replica incarnation).
    pub who: String,
    /// What.
    pub text: String,
}

/// A handler's or daemon's patch that the API server applied (seen at the API, whether its
/// answer reached the controller or was lost).
#[derive(Debug, Clone)]
pub struct Landing {
    /// When the API server applied it.
    pub at: Duration,
    /// The object's name.
    pub name: String,
    /// The span (index into [`Journal::spans`]) of the call or daemon that sent it.
    pub span: usize,
    /// The patch's token, unique per patch a handler returns or a daemon sends.
    pub token: String,
    /// A JSON patch (else a daemon's merge patch).
    pub json: bool,
}

#[derive(Default)]
struct Inner {
    /// Objects a write of which met an injected API fault.
    write_faults: std::collections::BTreeSet<String>,
    spans: Vec<Span>,
    notes: Vec<Note>,
    landings: Vec<Landing>,
    /// When the API server applied a write of each handler's success, by (object name, the
    /// uid the name had then, handler id): the first such write.
    successes: std::collections::BTreeMap<(String, String, String), Duration>,
    /// The uid each object name stands for: the last object created under it.
    uids: std::collections::HashMap<String, String>,
}

/// The journal of one run, shared by the world and the handler servers.
#[derive(Clone)]
pub struct Journal {
    origin: Instant,
    inner: Arc<Mutex<Inner>>,
}

impl Journal {
    /// A journal whose time 0 is now.
    pub fn new() -> Journal {
        Journal { origin: Instant::now(), inner: Arc::default() }
    }

    /// Virtual time since the origin.
    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Notes a line.
    pub fn note(&self, who: &str, text: impl Into<String>) {
        let note = Note { at: self.now(), who: who.to_string(), text: text.into() };
        self.inner.lock().unwrap().notes.push(note);
    }

    /// Opens a span; it ends when the guard is finished or dropped.
    pub fn open(&self, replica: &str, uid: &str, name: &str, what: What, after_gone: bool) -> SpanGuard {
        let span = Span {
            replica: replica.into(),
            uid: uid.into(),
            name: name.into(),
            what,
            start: self.now(),
            end: None,
            succeeded: false,
            after_gone,
        };
        let mut inner = self.inner.lock().unwrap();
        inner.spans.push(span);
        SpanGuard { journal: self.clone(), index: inner.spans.len() - 1, lag: Duration::ZERO }
    }

    /// Notes that a write of the object `name` met an injected API fault.
    pub fn write_fault(&self, name: &str) {
        self.inner.lock().unwrap().write_faults.insert(name.to_string());
    }

    /// The objects a write of which met an injected API fault.
    pub fn write_faults(&self) -> std::collections::BTreeSet<String> {
        self.inner.lock().unwrap().write_faults.clone()
    }

    /// Notes that the API server applied a patch carrying `token` (see [`token`]).
    pub fn landed(&self, name: &str, token: &str, json: bool) {
        let Some(span) = token.split(':').nth(1).and_then(|i| i.parse().ok()) else { return };
        let landing = Landing { at: self.now(), name: name.into(), span, token: token.into(), json };
        self.inner.lock().unwrap().landings.push(landing);
    }

    /// Notes that the API server applied a write of handler `id`'s success on object `name`.
    pub fn succeeded(&self, name: &str, id: &str) {
        let at = self.now();
        let mut inner = self.inner.lock().unwrap();
        let uid = inner.uids.get(name).cloned().unwrap_or_default();
        inner.successes.entry((name.into(), uid, id.into())).or_insert(at);
    }

    /// When each handler's success was first written, by (object name, its uid, handler id).
    pub fn successes(&self) -> std::collections::BTreeMap<(String, String, String), Duration> {
        self.inner.lock().unwrap().successes.clone()
    }

    /// Notes that object `name` was created with `uid` (again, after a deletion: a new uid).
    pub fn created(&self, name: &str, uid: &str) {
        self.inner.lock().unwrap().uids.insert(name.into(), uid.into());
    }

    /// Every patch applied so far, in order.
    pub fn landings(&self) -> Vec<Landing> {
        self.inner.lock().unwrap().landings.clone()
    }

    /// Every span so far.
    pub fn spans(&self) -> Vec<Span> {
        self.inner.lock().unwrap().spans.clone()
    }

    /// Every note so far.
    pub fn notes(&self) -> Vec<Note> {
        self.inner.lock().unwrap().notes.clone()
    }

    fn end(&self, index: usize, lag: Duration, succeeded: bool) {
        let now = self.now();
        let mut inner = self.inner.lock().unwrap();
        let span = &mut inner.spans[index];
        if span.end.is_none() {
            span.end = Some(now + lag);
            span.succeeded = succeeded;
        }
    }
}

impl Default for Journal {
    fn default() -> Self {
        Journal::new()
    }
}

/// Ends its span when finished (with the outcome) or dropped (cancelled, severed).
pub struct SpanGuard {
    journal: Journal,
    index: usize,
    /// How long after a drop the span really ends (a daemon winding down).
    pub lag: Duration,
}

impl SpanGuard {
    /// A token for the `n`-th patch this call or daemon sends: `{name}:{span}:{n}`, unique in
    /// the run, so that the API side can tell which span a patch came from.
    pub fn token(&self, name: &str, n: u64) -> String {
        format!("{name}:{}:{n}", self.index)
    }

    /// Ends the span now, with this outcome.
    pub fn finish(self, succeeded: bool) {
        self.journal.end(self.index, Duration::ZERO, succeeded);
    }
}

impl Drop for SpanGuard {
    fn drop(&mut self) {
        self.journal.end(self.index, self.lag, false);
    }
}

/// A broken invariant: which, when, and a description.
#[derive(Debug, Clone)]
pub struct Violation {
    /// `a`, `b`, `c` or `d`, as the issue names them; `e`: the run never ended; `f`: a handler
    /// ran again after the next one of its cause began; `g`: a JSON patch landed twice; `h`: a
    /// daemon's patch landed after its turn; `i`: a handler ran again after its success was
    /// written.
    pub invariant: &'static str,
    /// Around when (for the journal excerpt).
    pub at: Duration,
    /// What broke.
    pub text: String,
}

fn overlaps(a: &Span, b: &Span) -> bool {
    let (a_end, b_end) = (a.end.unwrap_or(Duration::MAX), b.end.unwrap_or(Duration::MAX));
    a.start < b_end && b.start < a_end
}

/// (a) never two replicas inside a handler call or daemon of the same object at once, and
/// never two instances of one object's daemon on one replica: from `from` on (peering
/// promises it only once its peers see each other again).
pub fn exclusive(spans: &[Span], from: Duration) -> Option<Violation> {
    let mut by_uid: std::collections::BTreeMap<&str, Vec<&Span>> = Default::default();
    for s in spans {
        by_uid.entry(s.uid.as_str()).or_default().push(s);
    }
    let mut first: Option<Violation> = None;
    for list in by_uid.values() {
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                let two_replicas = a.replica != b.replica;
                let two_daemons = a.what == What::Daemon && b.what == What::Daemon;
                let until = a.end.unwrap_or(Duration::MAX).min(b.end.unwrap_or(Duration::MAX));
                if (two_replicas || two_daemons) && overlaps(a, b) && until > from {
                    let at = a.start.max(b.start).max(from);
                    if first.as_ref().is_none_or(|f| at < f.at) {
                        let text = format!("{} and {} of {} overlap: {} and {}", a.replica, b.replica, a.name, show(a), show(b));
                        first = Some(Violation { invariant: "a", at, text });
                    }
                }
            }
        }
    }
    first
}

/// (c) no handler call or daemon starts once its object's deletion has completed: from `from`
/// on (a peer that overlaps another may still act on what the other finished).
pub fn none_after_deletion(spans: &[Span], from: Duration) -> Option<Violation> {
    spans.iter().find(|s| s.after_gone && s.start >= from).map(|s| Violation {
        invariant: "c",
        at: s.start,
        text: format!("{} started after {} was gone: {}", s.replica, s.name, show(s)),
    })
}

/// (b) at `end`, after the quiet period: each live object's create handler has succeeded and
/// its daemon runs exactly once; `gone` objects (deleted during the run) are gone.
pub fn settled(spans: &[Span], live: &[(String, String)], lingering: &[String], end: Duration) -> Option<Violation> {
    for (uid, name) in live {
        let created = spans.iter().any(|s| &s.uid == uid && s.what == What::Call("on_create".into()) && s.succeeded);
        if !created {
            return Some(Violation { invariant: "b", at: end, text: format!("{name}: no successful create handler by the end") });
        }
        let running: Vec<&Span> =
            spans.iter().filter(|s| &s.uid == uid && s.what == What::Daemon && s.end.is_none_or(|e| e > end)).collect();
        if running.len() != 1 {
            let on: Vec<&str> = running.iter().map(|s| s.replica.as_str()).collect();
            return Some(Violation {
                invariant: "b",
                at: end,
                text: format!("{name}: its daemon runs {} time(s) at the end (on {on:?}), not once", running.len()),
            });
        }
    }
    lingering.first().map(|name| Violation {
        invariant: "b",
        at: end,
        text: format!("{name} was deleted but is still in the store at the end"),
    })
}

/// (f) Kopf's order within a cause: once `on_create_2` was called for an object after a call
/// of `on_create` (registered before it) that succeeded, that success was written first, so
/// `on_create` is never called again for that object, whatever happens after (a handover, a
/// revocation, a kill, a crash). From `from` on. (An `on_create` that failed and waits for its
/// retry does not hold up `on_create_2`, as in Kopf.)
/// Objects a write of which met an injected API fault (`faulted`) are left out: calls are
/// at-least-once where a write's outcome is unknown (without that, one run in some thousands
/// broke it, and its seed did not replay).
pub fn in_order(spans: &[Span], from: Duration, faulted: &std::collections::BTreeSet<String>) -> Option<Violation> {
    let (first, second) = (What::Call("on_create".into()), What::Call("on_create_2".into()));
    for s in spans.iter().filter(|s| s.what == second && !faulted.contains(&s.name)) {
        // A handler that failed (temporarily, with a delay) does not hold up the next one, in
        // Kopf's order as in Kopf: only a success before the second handler began counts.
        let before = spans.iter().filter(|c| c.uid == s.uid && c.what == first && c.start <= s.start).max_by_key(|c| c.start);
        if !before.is_some_and(|c| c.succeeded) {
            continue;
        }
        let again = spans.iter().find(|c| c.uid == s.uid && c.what == first && c.start > s.start && c.start >= from);
        if let Some(c) = again {
            let text = format!("{} called again after {} began: {} after {}", "on_create", "on_create_2", show(c), show(s));
            return Some(Violation { invariant: "f", at: c.start, text });
        }
    }
    None
}

/// (g) every JSON patch a handler returns lands at most once: a patch whose answer was lost is
/// resent only under a precondition that refuses a second landing (`add /spec/items/-` twice
/// adds the item twice).
pub fn json_patches_once(landings: &[Landing]) -> Option<Violation> {
    let mut seen = std::collections::BTreeMap::new();
    for l in landings.iter().filter(|l| l.json) {
        if let Some(first) = seen.insert(l.token.as_str(), l.at) {
            let text = format!(
                "the JSON patch {} of {} landed twice: at {:.3} and {:.3}",
                l.token,
                l.name,
                first.as_secs_f64(),
                l.at.as_secs_f64()
            );
            return Some(Violation { invariant: "g", at: l.at, text });
        }
    }
    None
}

/// (h) a daemon's patch never lands after its turn ended: none lands once another instance of
/// the object's daemon (on any replica) has started after the first one ended (it starts only
/// once the first one's turn was given up or revoked), from `from` on.
pub fn no_daemon_patch_after_its_turn(spans: &[Span], landings: &[Landing], from: Duration) -> Option<Violation> {
    for l in landings.iter().filter(|l| !l.json && l.at >= from) {
        let Some(sender) = spans.get(l.span) else { continue };
        let Some(ended) = sender.end else { continue };
        let later = spans
            .iter()
            .enumerate()
            .find(|(i, s)| *i != l.span && s.uid == sender.uid && s.what == What::Daemon && s.start >= ended.max(from) && s.start < l.at);
        if let Some((_, next)) = later {
            let text = format!("the patch {} of {} landed at {:.3}, after {} began", l.token, show(sender), l.at.as_secs_f64(), show(next));
            return Some(Violation { invariant: "h", at: l.at, text });
        }
    }
    None
}

/// (i) a handler whose success was written is never called again for its cause: no create
/// handler's call starts after the write of its success landed, whoever owns the object then
/// (a handover, a restart, a watch that brings old events late). From `from` on.
pub fn successes_kept(
    spans: &[Span],
    successes: &std::collections::BTreeMap<(String, String, String), Duration>,
    from: Duration,
) -> Option<Violation> {
    for ((name, uid, id), at) in successes.iter().filter(|((_, _, id), _)| id.starts_with("on_create")) {
        let what = What::Call(id.clone());
        if let Some(again) = spans.iter().find(|s| &s.uid == uid && s.what == what && s.start > *at && s.start >= from) {
            let text = format!("{id} of {name} called again after its success was written at {:.3}: {}", at.as_secs_f64(), show(again));
            return Some(Violation { invariant: "i", at: again.start, text });
        }
    }
    None
}

/// A span as a journal line.
pub fn show(s: &Span) -> String {
    let what = match &s.what {
        What::Call(id) => format!("call {id}"),
        What::Daemon => "daemon".into(),
    };
    let end = s.end.map(|e| format!("{:.3}", e.as_secs_f64())).unwrap_or_else(|| "…".into());
    let ok = if s.succeeded { " ok" } else { "" };
    format!("[{}] {what} {} {:.3}–{end}{ok}", s.replica, s.name, s.start.as_secs_f64())
}

/// The journal lines (spans and notes) within `around` of `at`, in time order.
pub fn excerpt(journal: &Journal, at: Duration, around: Duration) -> String {
    let (from, to) = (at.saturating_sub(around), at + around);
    let mut lines: Vec<(Duration, String)> = Vec::new();
    for s in journal.spans() {
        if s.start <= to && s.end.is_none_or(|e| e >= from) {
            lines.push((s.start, format!("{:>8.3} span {}", s.start.as_secs_f64(), show(&s))));
        }
    }
    for l in journal.landings() {
        if l.at >= from && l.at <= to {
            let kind = if l.json { "JSON patch" } else { "daemon patch" };
            lines.push((l.at, format!("{:>8.3} api    applied the {kind} {}", l.at.as_secs_f64(), l.token)));
        }
    }
    for n in journal.notes() {
        if n.at >= from && n.at <= to {
            lines.push((n.at, format!("{:>8.3} {:<6} {}", n.at.as_secs_f64(), n.who, n.text)));
        }
    }
    lines.sort_by_key(|(t, _)| *t);
    lines.into_iter().map(|(_, l)| l).collect::<Vec<_>>().join("\n")
}
