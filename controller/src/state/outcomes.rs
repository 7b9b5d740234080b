//! What an answer from a handler server means, in one place for every kind of handler:
//! changing handlers (their progress records: retries, delays, timeouts, the errors mode),
//! timers (the next wait), daemons (restart or not) and activities (retry or give up).
//! Delays that come from outside are validated and clamped here and nowhere else. Pure; the
//! log wording is Kopf's.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::delays::{later, seconds};
use super::progress::{ProgressRecord, format_time};
use super::registry::{ErrorsMode, Handler};

/// How the call to a handler server ended, as far as the handler is concerned.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The server answered: its outcome, message and requested delay.
    Answered {
        /// The outcome.
        outcome: bosun_proto::v1::Outcome,
        /// Its message.
        message: String,
        /// The delay it asked for (temporary errors).
        delay: Option<f64>,
    },
    /// The server could not be reached (nothing ran): retry later, nothing is recorded.
    Unreachable(String),
    /// The handler ran and failed without an answer: too slow, or an error status (an
    /// uncaught exception in Python or Go). Counts as the handler's unexpected error.
    Broken(String),
}

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
    /// Failed unexpectedly: the errors mode decides; a retry waits the delay the server gave
    /// (the operator's default backoff, say), else the handler's backoff.
    Unexpected {
        /// The error message.
        message: String,
        /// The requested delay.
        delay: Option<Duration>,
    },
    /// The handler's `when` predicate did not hold.
    Skipped,
}

impl Attempt {
    /// An unexpected error with no delay of its own (a broken call, an unusable answer).
    pub fn unexpected(message: impl Into<String>) -> Attempt {
        Attempt::Unexpected { message: message.into(), delay: None }
    }
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
        let until = later(now, delay);
        r.retries = Some(r.retries.unwrap_or(0).saturating_add(1));
        r.delayed = Some(format_time(until));
        r.message = Some(message.clone());
        (Some(r), Verdict::Retry { message, until, unexpected })
    };
    match attempt {
        Attempt::Skipped => (None, Verdict::Skipped),
        Attempt::Success(_) => (Some(finish(r, true, None)), Verdict::Succeeded),
        Attempt::Permanent(m) => (Some(finish(r, false, Some(m.clone()))), Verdict::Failed(m.clone())),
        Attempt::Temporary { message, delay } => retry(r, message.clone(), delay.unwrap_or(h.backoff), false),
        Attempt::Unexpected { message: m, delay } => match h.errors {
            ErrorsMode::Temporary => retry(r, m.clone(), delay.unwrap_or(h.backoff), true),
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
    // A success recorded before (a call whose patch the API server then refused, the status
    // write with its success having landed) is written over as `false`, not left out: a merge
    // patch that leaves it out keeps the stored `true` beside the failure.
    r.success = r.success.and(Some(false));
    r.message = Some(message.to_string());
    r
}

/// The attempt an answer stands for; `None` when the server could not be reached (nothing
/// ran, nothing counts). A delay the server should not have sent (with a temporary or an
/// unexpected error) makes the attempt an unexpected error that names the value, retried after
/// the handler's backoff.
pub fn attempt_of(answer: &Answer, result: Option<Value>) -> Option<Attempt> {
    use bosun_proto::v1::Outcome;
    let delayed = |message: &str, delay: Option<f64>| {
        seconds(delay, "delay_seconds")
            .map_err(|why| Attempt::unexpected(format!("the handler server answered with an invalid delay: {why} ({message})")))
    };
    match answer {
        Answer::Unreachable(_) => None,
        Answer::Broken(why) => Some(Attempt::unexpected(why.clone())),
        Answer::Answered { outcome, message, delay } => Some(match outcome {
            Outcome::Success => Attempt::Success(result),
            Outcome::TemporaryError => match delayed(message, *delay) {
                Ok(delay) => Attempt::Temporary { message: message.clone(), delay },
                Err(bad) => bad,
            },
            Outcome::PermanentError => Attempt::Permanent(message.clone()),
            Outcome::Skipped => Attempt::Skipped,
            Outcome::UnexpectedError => match delayed(message, *delay) {
                Ok(delay) => Attempt::Unexpected { message: message.clone(), delay },
                Err(bad) => bad,
            },
        }),
    }
}

/// How long to wait before retrying a handler server that could not be reached (timers,
/// daemons, activities), whatever the handler's own backoff.
pub const UNREACHABLE_RETRY: Duration = Duration::from_secs(10);

/// What one timer tick means for the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerNext {
    /// The regular interval.
    Interval,
    /// Sooner or later than the interval, to retry.
    Retry(Duration),
}

/// The next wait of a timer after an attempt (`None`: the server was unreachable).
pub fn timer_next(h: &Handler, attempt: Option<&Attempt>) -> TimerNext {
    match attempt {
        None => TimerNext::Retry(h.backoff.min(UNREACHABLE_RETRY)),
        Some(Attempt::Success(_) | Attempt::Skipped | Attempt::Permanent(_)) => TimerNext::Interval,
        Some(Attempt::Temporary { delay, .. }) => TimerNext::Retry(delay.unwrap_or(h.backoff)),
        Some(Attempt::Unexpected { delay, .. }) if h.errors == ErrorsMode::Temporary => TimerNext::Retry(delay.unwrap_or(h.backoff)),
        Some(Attempt::Unexpected { .. }) => TimerNext::Interval,
    }
}

/// What to do after a daemon's stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonNext {
    /// Start it again after this long.
    Restart(Duration),
    /// Leave it stopped.
    Done,
}

/// Whether a daemon is restarted after it ended with `attempt` (`None`: its server could not
/// be reached). Restarts wait the daemon's own backoff (`DaemonOptions.backoff_seconds`).
pub fn daemon_next(h: &Handler, attempt: Option<&Attempt>) -> DaemonNext {
    let backoff = h.daemon.backoff;
    match attempt {
        None => DaemonNext::Restart(backoff.min(UNREACHABLE_RETRY)),
        Some(Attempt::Temporary { delay, .. }) => DaemonNext::Restart(delay.unwrap_or(backoff)),
        Some(Attempt::Unexpected { delay, .. }) if h.errors == ErrorsMode::Temporary => DaemonNext::Restart(delay.unwrap_or(backoff)),
        Some(_) => DaemonNext::Done,
    }
}

/// What an activity attempt (startup, cleanup) means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActivityNext {
    /// Done.
    Succeeded,
    /// Try again after this long.
    Retry(Duration, String),
    /// Give up.
    Failed(String),
}

/// Judges one activity attempt (`None`: unreachable), the `retry`-th (from 0).
pub fn activity_next(h: &Handler, attempt: Option<&Attempt>, unreachable: &str, retry: u32) -> ActivityNext {
    let limit_hit = h.retries.is_some_and(|limit| retry.saturating_add(1) >= limit);
    let retry_or_fail = |delay: Duration, message: String| {
        if limit_hit { ActivityNext::Failed(format!("{message} (retries exhausted)")) } else { ActivityNext::Retry(delay, message) }
    };
    match attempt {
        None => ActivityNext::Retry(h.backoff.min(Duration::from_secs(5)), format!("handler server unreachable: {unreachable}")),
        Some(Attempt::Success(_) | Attempt::Skipped) => ActivityNext::Succeeded,
        Some(Attempt::Permanent(m)) => ActivityNext::Failed(m.clone()),
        Some(Attempt::Temporary { message, delay }) => retry_or_fail(delay.unwrap_or(h.backoff), message.clone()),
        Some(Attempt::Unexpected { message, delay }) => match h.errors {
            ErrorsMode::Ignored => ActivityNext::Succeeded,
            ErrorsMode::Permanent => ActivityNext::Failed(message.clone()),
            ErrorsMode::Temporary => retry_or_fail(delay.unwrap_or(h.backoff), message.clone()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::delays::MAX_DELAY;
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
                Attempt::unexpected("boom"),
                Some((None, None, Some(1))),
                Verdict::Retry { message: "boom".into(), until: later(60), unexpected: true },
            ),
            (ErrorsMode::Permanent, Attempt::unexpected("boom"), Some((None, Some(true), None)), Verdict::Failed("boom".into())),
            (ErrorsMode::Ignored, Attempt::unexpected("boom"), Some((Some(true), None, None)), Verdict::Ignored("boom".into())),
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

    fn answered(outcome: pb::Outcome, delay: Option<f64>) -> Answer {
        Answer::Answered { outcome, message: "m".into(), delay }
    }

    #[test]
    fn seconds_from_outside_are_validated_and_clamped() {
        let cases = [
            (None, Ok(None)),
            (Some(0.0), Ok(Some(Duration::ZERO))),
            (Some(1.5), Ok(Some(Duration::from_millis(1500)))),
            (Some(1e300), Ok(Some(MAX_DELAY))),
            (Some(f64::INFINITY), Err(())),
            (Some(f64::NAN), Err(())),
            (Some(-1.0), Err(())),
        ];
        for (v, want) in cases {
            assert_eq!(seconds(v, "x").map_err(|_| ()), want, "{v:?}");
        }
        assert_eq!(later(now(), MAX_DELAY), now() + chrono::Duration::from_std(MAX_DELAY).unwrap());
        assert_eq!(later(DateTime::<Utc>::MAX_UTC, Duration::from_secs(1)), DateTime::<Utc>::MAX_UTC);
    }

    #[test]
    fn answers_become_attempts_and_bad_delays_are_the_handlers_error() {
        let cases = [
            (answered(pb::Outcome::Success, None), Some(Attempt::Success(None))),
            (
                answered(pb::Outcome::TemporaryError, Some(2.0)),
                Some(Attempt::Temporary { message: "m".into(), delay: Some(Duration::from_secs(2)) }),
            ),
            (answered(pb::Outcome::TemporaryError, Some(1e300)), Some(Attempt::Temporary { message: "m".into(), delay: Some(MAX_DELAY) })),
            (answered(pb::Outcome::PermanentError, None), Some(Attempt::Permanent("m".into()))),
            (answered(pb::Outcome::Skipped, None), Some(Attempt::Skipped)),
            (answered(pb::Outcome::UnexpectedError, None), Some(Attempt::unexpected("m"))),
            (Answer::Broken("failed with UNKNOWN: boom".into()), Some(Attempt::unexpected("failed with UNKNOWN: boom"))),
            (Answer::Unreachable("refused".into()), None),
        ];
        for (answer, want) in cases {
            assert_eq!(attempt_of(&answer, None), want, "{answer:?}");
        }
        let bad = attempt_of(&answered(pb::Outcome::TemporaryError, Some(-5.0)), None);
        assert!(matches!(&bad, Some(Attempt::Unexpected { message, delay: None }) if message.contains("-5")), "{bad:?}");
    }

    /// `delay_seconds` on an unexpected error (a Python SDK gives the operator's default
    /// backoff) replaces the handler's backoff wherever one applies, validated as a temporary
    /// error's delay is.
    #[test]
    fn unexpected_errors_with_a_delay_wait_it_instead_of_the_backoff() {
        let s = Duration::from_secs;
        let boom = |delay: Option<f64>| Answer::Answered { outcome: pb::Outcome::UnexpectedError, message: "boom".into(), delay };
        let read = [
            (boom(Some(7.0)), Attempt::Unexpected { message: "boom".into(), delay: Some(s(7)) }),
            (boom(None), Attempt::unexpected("boom")),
            (boom(Some(1e300)), Attempt::Unexpected { message: "boom".into(), delay: Some(MAX_DELAY) }),
        ];
        for (answer, want) in read {
            assert_eq!(attempt_of(&answer, None), Some(want), "{answer:?}");
        }
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let got = attempt_of(&boom(Some(bad)), None);
            assert!(
                matches!(&got, Some(Attempt::Unexpected { message, delay: None }) if message.contains("invalid delay") && message.contains("(boom)")),
                "{bad}: {got:?}"
            );
        }

        let delayed = Attempt::Unexpected { message: "boom".into(), delay: Some(s(7)) };
        let plain = Attempt::unexpected("boom");
        let mut h = handler(ErrorsMode::Temporary, None, None);
        h.daemon.backoff = s(2);
        let mut permanent = h.clone();
        permanent.errors = ErrorsMode::Permanent;
        // (handler, attempt) → the changing handler's retry, the timer's, the daemon's, the activity's
        type Want = (Option<i64>, TimerNext, DaemonNext, ActivityNext);
        let cases: [(&Handler, &Attempt, Want); 3] = [
            (&h, &delayed, (Some(7), TimerNext::Retry(s(7)), DaemonNext::Restart(s(7)), ActivityNext::Retry(s(7), "boom".into()))),
            (&h, &plain, (Some(60), TimerNext::Retry(s(60)), DaemonNext::Restart(s(2)), ActivityNext::Retry(s(60), "boom".into()))),
            (&permanent, &delayed, (None, TimerNext::Interval, DaemonNext::Done, ActivityNext::Failed("boom".into()))),
        ];
        for (h, attempt, (retry, timer, daemon, activity)) in cases {
            let (_, verdict) = record_attempt(h, None, "create", attempt, now());
            let until = match verdict {
                Verdict::Retry { until, unexpected: true, .. } => Some((until - now()).num_seconds()),
                _ => None,
            };
            assert_eq!(until, retry, "{:?} {attempt:?}", h.errors);
            assert_eq!(timer_next(h, Some(attempt)), timer, "{:?} {attempt:?}", h.errors);
            assert_eq!(daemon_next(h, Some(attempt)), daemon, "{:?} {attempt:?}", h.errors);
            assert_eq!(activity_next(h, Some(attempt), "", 0), activity, "{:?} {attempt:?}", h.errors);
        }
    }

    #[test]
    fn timer_attempts_choose_the_next_wait() {
        let s = Duration::from_secs;
        let tmp = |d: Option<u64>| Attempt::Temporary { message: "m".into(), delay: d.map(s) };
        let cases = [
            (ErrorsMode::Temporary, Some(Attempt::Success(None)), TimerNext::Interval),
            (ErrorsMode::Temporary, Some(tmp(Some(3))), TimerNext::Retry(s(3))),
            (ErrorsMode::Temporary, Some(tmp(None)), TimerNext::Retry(s(60))),
            (ErrorsMode::Temporary, Some(Attempt::Permanent("m".into())), TimerNext::Interval),
            (ErrorsMode::Temporary, Some(Attempt::unexpected("m")), TimerNext::Retry(s(60))),
            (ErrorsMode::Ignored, Some(Attempt::unexpected("m")), TimerNext::Interval),
            (ErrorsMode::Temporary, None, TimerNext::Retry(s(10))),
        ];
        for (mode, attempt, want) in cases {
            assert_eq!(timer_next(&handler(mode, None, None), attempt.as_ref()), want, "{mode:?} {attempt:?}");
        }
    }

    #[test]
    fn daemon_ends_decide_restarts_with_the_daemons_own_backoff() {
        let s = Duration::from_secs;
        let mut h = handler(ErrorsMode::Temporary, None, None);
        h.daemon.backoff = s(2);
        let mut permanent = h.clone();
        permanent.errors = ErrorsMode::Permanent;
        let tmp = |d: Option<u64>| Attempt::Temporary { message: "m".into(), delay: d.map(s) };
        let cases = [
            (&h, Some(Attempt::Success(None)), DaemonNext::Done),
            (&h, Some(tmp(Some(5))), DaemonNext::Restart(s(5))),
            (&h, Some(tmp(None)), DaemonNext::Restart(s(2))),
            (&h, Some(Attempt::Permanent("m".into())), DaemonNext::Done),
            (&h, Some(Attempt::unexpected("m")), DaemonNext::Restart(s(2))),
            (&permanent, Some(Attempt::unexpected("m")), DaemonNext::Done),
            (&h, None, DaemonNext::Restart(s(2))),
        ];
        for (h, attempt, want) in cases {
            assert_eq!(daemon_next(h, attempt.as_ref()), want, "{attempt:?}");
        }
    }

    #[test]
    fn activity_attempts_become_steps() {
        let s = Duration::from_secs;
        let tmp = |d: Option<u64>| Attempt::Temporary { message: "m".into(), delay: d.map(s) };
        let h = handler(ErrorsMode::Temporary, None, None);
        let limited = handler(ErrorsMode::Temporary, Some(3), None);
        let cases = [
            (&h, Some(Attempt::Success(None)), 0, ActivityNext::Succeeded),
            (&h, Some(tmp(Some(2))), 0, ActivityNext::Retry(s(2), "m".into())),
            (&h, Some(tmp(None)), 0, ActivityNext::Retry(s(60), "m".into())),
            (&limited, Some(tmp(Some(1))), 2, ActivityNext::Failed("m (retries exhausted)".into())),
            (&h, Some(Attempt::Permanent("m".into())), 0, ActivityNext::Failed("m".into())),
            (&h, Some(Attempt::unexpected("m")), 0, ActivityNext::Retry(s(60), "m".into())),
            (&h, None, 0, ActivityNext::Retry(s(5), "handler server unreachable: down".into())),
        ];
        for (h, attempt, retry, want) in cases {
            assert_eq!(activity_next(h, attempt.as_ref(), "down", retry), want, "{attempt:?}");
        }
    }
}
