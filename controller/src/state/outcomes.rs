//! What one attempt of a handler means for its progress record: retries, delays, timeouts,
//! the errors mode. Pure; the log wording is Kopf's.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::progress::{ProgressRecord, format_time};
use super::registry::{ErrorsMode, Handler};

/// How one attempt ended, as the handler server said.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// Succeeded, maybe with a result to store.
    Success(Option<Value>),
    /// Failed; retry after the delay (or the handler's backoff).
    Temporary {
        /// The error message.
        message: String,
        /// The requested delay.
        delay: Option<Duration>,
    },
    /// Failed for good.
    Permanent(String),
    /// Failed unexpectedly: the errors mode decides.
    Unexpected(String),
    /// The handler's `when` predicate did not hold.
    Skipped,
}

/// What the controller concludes from an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// `Handler 'x' succeeded.`
    Succeeded,
    /// `Handler 'x' failed temporarily: msg` — retried at `until`.
    Retry {
        /// The log line's tail.
        message: String,
        /// Not before.
        until: DateTime<Utc>,
        /// Unexpected error (Kopf says "failed with an exception. Will retry.").
        unexpected: bool,
    },
    /// `Handler 'x' failed permanently: msg`.
    Failed(String),
    /// `Handler 'x' failed with an exception. Will ignore.`
    Ignored(String),
    /// Nothing recorded.
    Skipped,
}

impl Verdict {
    /// The log line for handler `id`, in Kopf's words.
    pub fn log_line(&self, id: &str) -> String {
        match self {
            Verdict::Succeeded => format!("Handler '{id}' succeeded."),
            Verdict::Retry { message, unexpected: false, .. } => format!("Handler '{id}' failed temporarily: {message}"),
            Verdict::Retry { message, unexpected: true, .. } => {
                format!("Handler '{id}' failed with an exception. Will retry. {message}")
            }
            Verdict::Failed(message) => format!("Handler '{id}' failed permanently: {message}"),
            Verdict::Ignored(message) => format!("Handler '{id}' failed with an exception. Will ignore. {message}"),
            Verdict::Skipped => format!("Handler '{id}' is skipped: its `when` filter does not match."),
        }
    }

    /// Whether the handler is finished for this cause.
    pub fn finished(&self) -> bool {
        !matches!(self, Verdict::Retry { .. })
    }
}

/// Checks the retry and timeout limits before an attempt; `Some(message)` means the
/// handler fails permanently without being called.
pub fn precheck(h: &Handler, record: Option<&ProgressRecord>, now: DateTime<Utc>) -> Option<String> {
    let record = record?;
    if let (Some(timeout), Some(started)) = (h.timeout, record.started_at())
        && (now - started).to_std().unwrap_or_default() >= timeout
    {
        return Some(format!("Handler '{}' has timed out after {:?}.", h.id, timeout));
    }
    if let Some(limit) = h.retries
        && record.retries.unwrap_or(0) >= limit
    {
        return Some(format!("Handler '{}' has exceeded {} retries.", h.id, limit));
    }
    None
}

/// The new progress record after `attempt`, and the verdict to log. `None` for skipped
/// handlers (nothing is stored for them).
pub fn record_attempt(
    h: &Handler,
    prev: Option<&ProgressRecord>,
    purpose: &str,
    attempt: &Attempt,
    now: DateTime<Utc>,
) -> (Option<ProgressRecord>, Verdict) {
    let mut r = prev.cloned().unwrap_or_default();
    r.purpose = Some(purpose.to_string());
    r.started.get_or_insert_with(|| format_time(now));
    r.delayed = None;
    let finish = |mut r: ProgressRecord, ok: bool, message: Option<String>| {
        r.stopped = Some(format_time(now));
        r.success = ok.then_some(true);
        r.failure = (!ok).then_some(true);
        if message.is_some() {
            r.message = message;
        }
        r
    };
    let retry = |mut r: ProgressRecord, message: String, delay: Duration, unexpected: bool| {
        let until = now + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
        r.retries = Some(r.retries.unwrap_or(0) + 1);
        r.delayed = Some(format_time(until));
        r.message = Some(message.clone());
        (Some(r), Verdict::Retry { message, until, unexpected })
    };
    match attempt {
        Attempt::Skipped => (None, Verdict::Skipped),
        Attempt::Success(_) => (Some(finish(r, true, None)), Verdict::Succeeded),
        Attempt::Permanent(m) => (Some(finish(r, false, Some(m.clone()))), Verdict::Failed(m.clone())),
        Attempt::Temporary { message, delay } => retry(r, message.clone(), delay.unwrap_or(h.backoff), false),
        Attempt::Unexpected(m) => match h.errors {
            ErrorsMode::Temporary => retry(r, m.clone(), h.backoff, true),
            ErrorsMode::Permanent => (Some(finish(r, false, Some(m.clone()))), Verdict::Failed(m.clone())),
            ErrorsMode::Ignored => (Some(finish(r, true, Some(m.clone()))), Verdict::Ignored(m.clone())),
        },
    }
}

/// The record of a handler that fails permanently without a call (limits exceeded).
pub fn record_limit_failure(prev: Option<&ProgressRecord>, purpose: &str, message: &str, now: DateTime<Utc>) -> ProgressRecord {
    let mut r = prev.cloned().unwrap_or_default();
    r.purpose = Some(purpose.to_string());
    r.started.get_or_insert_with(|| format_time(now));
    r.delayed = None;
    r.stopped = Some(format_time(now));
    r.failure = Some(true);
    r.success = None;
    r.message = Some(message.to_string());
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_proto::v1 as pb;
    use chrono::TimeZone;

    fn handler(errors: ErrorsMode, retries: Option<u32>, timeout: Option<u64>) -> Handler {
        let spec = pb::HandlerSpec {
            id: "h".into(),
            kind: pb::HandlerKind::Create as i32,
            resource: Some(pb::ResourceSelector { name: "kex".into(), ..Default::default() }),
            ..Default::default()
        };
        let mut h = Handler::from_spec(&spec, 0).unwrap();
        h.errors = errors;
        h.retries = retries;
        h.timeout = timeout.map(Duration::from_secs);
        h
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn attempts_become_records_and_verdicts() {
        let t = now();
        let ts = format_time(t);
        let later = |s: i64| t + chrono::Duration::seconds(s);
        let cases: Vec<(ErrorsMode, Attempt, Option<(Option<bool>, Option<bool>, Option<u32>)>, Verdict)> = vec![
            (ErrorsMode::Temporary, Attempt::Success(None), Some((Some(true), None, None)), Verdict::Succeeded),
            (ErrorsMode::Temporary, Attempt::Permanent("no".into()), Some((None, Some(true), None)), Verdict::Failed("no".into())),
            (
                ErrorsMode::Temporary,
                Attempt::Temporary { message: "wait".into(), delay: Some(Duration::from_secs(10)) },
                Some((None, None, Some(1))),
                Verdict::Retry { message: "wait".into(), until: later(10), unexpected: false },
            ),
            (
                ErrorsMode::Temporary,
                Attempt::Temporary { message: "wait".into(), delay: None },
                Some((None, None, Some(1))),
                Verdict::Retry { message: "wait".into(), until: later(60), unexpected: false },
            ),
            (
                ErrorsMode::Temporary,
                Attempt::Unexpected("boom".into()),
                Some((None, None, Some(1))),
                Verdict::Retry { message: "boom".into(), until: later(60), unexpected: true },
            ),
            (ErrorsMode::Permanent, Attempt::Unexpected("boom".into()), Some((None, Some(true), None)), Verdict::Failed("boom".into())),
            (ErrorsMode::Ignored, Attempt::Unexpected("boom".into()), Some((Some(true), None, None)), Verdict::Ignored("boom".into())),
            (ErrorsMode::Temporary, Attempt::Skipped, None, Verdict::Skipped),
        ];
        for (mode, attempt, want_record, want_verdict) in cases {
            let (rec, verdict) = record_attempt(&handler(mode, None, None), None, "create", &attempt, t);
            assert_eq!(verdict, want_verdict, "{attempt:?}");
            match (rec, want_record) {
                (None, None) => {}
                (Some(r), Some((success, failure, retries))) => {
                    assert_eq!((r.success, r.failure, r.retries), (success, failure, retries), "{attempt:?}");
                    assert_eq!(r.started.as_deref(), Some(ts.as_str()));
                    assert_eq!(r.purpose.as_deref(), Some("create"));
                    assert_eq!(r.stopped.is_some(), verdict.finished());
                }
                (r, w) => panic!("{attempt:?}: record {r:?}, wanted {w:?}"),
            }
        }
    }

    #[test]
    fn retries_accumulate_and_started_is_kept() {
        let h = handler(ErrorsMode::Temporary, None, None);
        let first = Attempt::Temporary { message: "a".into(), delay: Some(Duration::from_secs(1)) };
        let (r1, _) = record_attempt(&h, None, "create", &first, now());
        let (r2, _) = record_attempt(&h, r1.as_ref(), "create", &first, now() + chrono::Duration::seconds(5));
        let r2 = r2.unwrap();
        assert_eq!(r2.retries, Some(2));
        assert_eq!(r2.started, r1.unwrap().started);
    }

    #[test]
    fn precheck_enforces_retries_and_timeout() {
        let started = ProgressRecord { started: Some(format_time(now())), retries: Some(3), ..Default::default() };
        let cases = [
            (handler(ErrorsMode::Temporary, None, None), None, 0, None),
            (handler(ErrorsMode::Temporary, Some(3), None), Some(&started), 0, Some("Handler 'h' has exceeded 3 retries.")),
            (handler(ErrorsMode::Temporary, Some(4), None), Some(&started), 0, None),
            (handler(ErrorsMode::Temporary, None, Some(60)), Some(&started), 59, None),
            (handler(ErrorsMode::Temporary, None, Some(60)), Some(&started), 60, Some("Handler 'h' has timed out after 60s.")),
        ];
        for (h, rec, after, want) in cases {
            let got = precheck(&h, rec, now() + chrono::Duration::seconds(after));
            assert_eq!(got.as_deref(), want);
        }
    }

    #[test]
    fn verdicts_log_in_kopf_words() {
        let until = now();
        let cases = [
            (Verdict::Succeeded, "Handler 'x' succeeded."),
            (Verdict::Retry { message: "later".into(), until, unexpected: false }, "Handler 'x' failed temporarily: later"),
            (Verdict::Failed("no".into()), "Handler 'x' failed permanently: no"),
        ];
        for (v, want) in cases {
            assert_eq!(v.log_line("x"), want);
        }
    }
}
