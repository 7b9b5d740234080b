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

#[derive(Default)]
struct Inner {
    /// Objects a write of which met an injected API fault.
    write_faults: std::collections::BTreeSet<String>,
    spans: Vec<Span>,
    notes: Vec<Note>,
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
    /// ran again after the next one of its cause began.
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

/// (f) Kopf's order within a cause: once `on_create_2` was called for an object, `on_create`
/// (registered before it) had its success written, so it is never called again for that
/// object, whatever happens after (a handover, a revocation, a kill, a crash). From `from` on.
/// Objects a write of which met an injected API fault (`faulted`) are left out: calls are
/// at-least-once where a write's outcome is unknown (without that, one run in some thousands
/// broke it, and its seed did not replay).
pub fn in_order(spans: &[Span], from: Duration, faulted: &std::collections::BTreeSet<String>) -> Option<Violation> {
    let (first, second) = (What::Call("on_create".into()), What::Call("on_create_2".into()));
    for s in spans.iter().filter(|s| s.what == second && !faulted.contains(&s.name)) {
        let again = spans.iter().find(|c| c.uid == s.uid && c.what == first && c.start > s.start && c.start >= from);
        if let Some(c) = again {
            let text = format!("{} called again after {} began: {} after {}", "on_create", "on_create_2", show(c), show(s));
            return Some(Violation { invariant: "f", at: c.start, text });
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
    for n in journal.notes() {
        if n.at >= from && n.at <= to {
            lines.push((n.at, format!("{:>8.3} {:<6} {}", n.at.as_secs_f64(), n.who, n.text)));
        }
    }
    lines.sort_by_key(|(t, _)| *t);
    lines.into_iter().map(|(_, l)| l).collect::<Vec<_>>().join("\n")
}
