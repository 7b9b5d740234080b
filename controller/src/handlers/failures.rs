//! How a call to a handler server failed, sorted by what it means for the handler: a call
//! that may have run is an attempt (its retries, timeout and errors mode apply); only a call
//! that surely never reached the server leaves the handler's record alone.
//!
//! tonic reports transport failures as a `Status` whose source chain holds the typed errors
//! of the layers below (tonic, hyper, h2), and gives them codes that do not say when the
//! failure happened: a connection refused and a connection lost mid-call can both read
//! `UNKNOWN: transport error` or `UNAVAILABLE`, and its own deadline reads `CANCELLED`. So the
//! chain is read, not the code:
//! - never sent: `tonic::ConnectError` (no connection was made), a `hyper::Error` that is
//!   `is_canceled()` (the request was dropped before it was handed to the connection), an
//!   `h2::Error` with `REFUSED_STREAM` (RFC 9113 §8.7: closed before any processing) or a
//!   GOAWAY of the server with `NO_ERROR` (a graceful shutdown: the streams above its last
//!   stream id were not processed);
//! - the client's own deadline: `tonic::TimeoutExpired`;
//! - anything else below gRPC (a reset, a broken pipe, a keep-alive timeout): the request
//!   may have reached the handler, which may have made its server exit (an OOM kill, a
//!   segfault, `os._exit`): an attempt.
//!
//! A status the server sent itself has no source: `DEADLINE_EXCEEDED` is a timeout,
//! `UNAVAILABLE` is the contract's "not now, nothing ran" (the SDKs answer it while their
//! indices are empty), everything else is the handler's failure.

use std::error::Error as StdError;
use std::time::Duration;

use crate::state::outcomes::Answer;

/// How a call to a handler server failed without an answer from the handler.
#[derive(Debug, Clone, PartialEq)]
pub enum CallFailure {
    /// The call never reached the server (no connection, refused before processing, or the
    /// server said `UNAVAILABLE`): nothing ran; the call is retried once the server is back.
    Unreachable(String),
    /// The connection was lost after the request was sent: the handler may have run (and
    /// may have made its server exit), so this is the handler's unexpected error.
    Lost(String),
    /// The handler did not answer within its deadline (`call_timeout_seconds`): the handler's
    /// unexpected error, so its retries and timeout apply.
    TimedOut(Duration),
    /// The server answered with a gRPC error (what Python and Go servers answer for an
    /// uncaught exception): the handler's unexpected error.
    Failed {
        /// The gRPC status code.
        code: tonic::Code,
        /// Its message.
        message: String,
    },
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Unreachable(why) => write!(f, "the handler server is unreachable ({why})"),
            CallFailure::Lost(why) => write!(f, "the connection to the handler server was lost during the call ({why})"),
            CallFailure::TimedOut(d) => write!(f, "did not answer in {}", crate::logs::human(*d)),
            CallFailure::Failed { code, message } if message.is_empty() => write!(f, "failed with {}", code_name(*code)),
            CallFailure::Failed { code, message } => write!(f, "failed with {}: {message}", code_name(*code)),
        }
    }
}

impl CallFailure {
    /// What the failure means for the handler.
    pub fn answer(&self) -> Answer {
        match self {
            CallFailure::Unreachable(_) => Answer::Unreachable(self.to_string()),
            _ => Answer::Broken(self.to_string()),
        }
    }
}

/// A gRPC status code as the gRPC docs spell it (`UNKNOWN`, `DEADLINE_EXCEEDED`).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Sorts a failed call's status (see the module docs); `deadline` is the call's own.
pub fn classify(s: &tonic::Status, deadline: Duration) -> CallFailure {
    use tonic::Code;
    if chain(s).any(|e| e.is::<tonic::TimeoutExpired>()) {
        return CallFailure::TimedOut(deadline);
    }
    if chain(s).any(never_sent) {
        return CallFailure::Unreachable(describe(s));
    }
    if StdError::source(s).is_some() {
        return CallFailure::Lost(describe(s));
    }
    match s.code() {
        Code::DeadlineExceeded => CallFailure::TimedOut(deadline),
        Code::Unavailable => CallFailure::Unreachable(if s.message().is_empty() { "UNAVAILABLE".into() } else { s.message().to_string() }),
        code => CallFailure::Failed { code, message: s.message().to_string() },
    }
}

/// The errors under a status, outermost first.
fn chain(s: &tonic::Status) -> impl Iterator<Item = &(dyn StdError + 'static)> {
    std::iter::successors(StdError::source(s), |e: &&(dyn StdError + 'static)| (*e).source())
}

/// Whether one error of the chain proves that the request never reached the server.
fn never_sent(e: &(dyn StdError + 'static)) -> bool {
    if e.is::<tonic::ConnectError>() {
        return true;
    }
    if let Some(h) = e.downcast_ref::<hyper::Error>() {
        return h.is_canceled();
    }
    if let Some(h2) = e.downcast_ref::<h2::Error>() {
        let graceful_goaway = h2.is_go_away() && h2.is_remote() && h2.reason() == Some(h2::Reason::NO_ERROR);
        return h2.reason() == Some(h2::Reason::REFUSED_STREAM) || graceful_goaway;
    }
    false
}

/// The status's code and message with the innermost cause: `UNKNOWN: transport error:
/// connection reset by peer (os error 104)`.
fn describe(s: &tonic::Status) -> String {
    let mut text = code_name(s.code()).to_string();
    if !s.message().is_empty() {
        text = format!("{text}: {}", s.message());
    }
    match chain(s).last().map(ToString::to_string) {
        Some(cause) if !text.contains(&cause) => format!("{text}: {cause}"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::{Code, Status};

    /// tonic's `transport::Error` (whose constructor is private): "transport error", with the
    /// failure of the layer below as its source. The channel wraps every failure in it.
    #[derive(Debug)]
    struct Transport(Box<dyn StdError + Send + Sync>);

    impl std::fmt::Display for Transport {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("transport error")
        }
    }

    impl StdError for Transport {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&*self.0)
        }
    }

    /// A status as the channel makes it from what failed below it.
    fn from_transport(below: impl StdError + Send + Sync + 'static) -> Status {
        Status::from_error(Box::new(Transport(Box::new(below))))
    }

    fn io(kind: std::io::ErrorKind, text: &str) -> std::io::Error {
        std::io::Error::new(kind, text)
    }

    #[test]
    fn only_calls_that_never_reached_the_server_are_unreachable_and_the_others_say_what_happened() {
        use std::io::ErrorKind::*;
        let d = Duration::from_secs(3);
        let refused = tonic::ConnectError(Box::new(io(ConnectionRefused, "Connection refused (os error 111)")));
        let connect_timeout = tonic::ConnectError(Box::new(io(TimedOut, "connect timed out")));
        let cases: Vec<(Status, &str, &str)> = vec![
            // Nothing ran.
            (from_transport(refused), "unreachable", "the handler server is unreachable (UNAVAILABLE: Connection refused (os error 111))"),
            (from_transport(connect_timeout), "unreachable", "the handler server is unreachable (UNAVAILABLE: connect timed out)"),
            (from_transport(h2::Error::from(h2::Reason::REFUSED_STREAM)), "unreachable", "the handler server is unreachable"),
            (Status::new(Code::Unavailable, "indices are empty"), "unreachable", "the handler server is unreachable (indices are empty)"),
            (Status::new(Code::Unavailable, ""), "unreachable", "the handler server is unreachable (UNAVAILABLE)"),
            // The connection went after the request was sent: the server exited mid-call.
            (
                from_transport(io(ConnectionReset, "connection reset by peer")),
                "lost",
                "the connection to the handler server was lost during the call (UNKNOWN: transport error: connection reset by peer)",
            ),
            (from_transport(io(BrokenPipe, "stream closed because of a broken pipe")), "lost", "was lost during the call"),
            (from_transport(h2::Error::from(h2::Reason::INTERNAL_ERROR)), "lost", "was lost during the call"),
            (Status::from_error(Box::new(io(UnexpectedEof, "eof"))), "lost", "was lost during the call (UNKNOWN: eof)"),
            // The client's own deadline, as tonic reports it (`CANCELLED: Timeout expired`),
            // and the server's.
            (from_transport(tonic::TimeoutExpired(())), "timeout", "did not answer in 3s"),
            (Status::new(Code::DeadlineExceeded, "Deadline Exceeded"), "timeout", "did not answer in 3s"),
            // Statuses the server sent.
            (
                Status::new(Code::Unknown, "Exception calling application: boom"),
                "failed",
                "failed with UNKNOWN: Exception calling application: boom",
            ),
            (Status::new(Code::Internal, ""), "failed", "failed with INTERNAL"),
            (Status::new(Code::Cancelled, "cancelled by the handler"), "failed", "failed with CANCELLED: cancelled by the handler"),
            (Status::new(Code::Unimplemented, "no Handle"), "failed", "failed with UNIMPLEMENTED: no Handle"),
        ];
        for (status, kind, text) in cases {
            let got = classify(&status, d);
            let got_kind = match got {
                CallFailure::Unreachable(_) => "unreachable",
                CallFailure::Lost(_) => "lost",
                CallFailure::TimedOut(_) => "timeout",
                CallFailure::Failed { .. } => "failed",
            };
            assert_eq!(got_kind, kind, "{status:?}: {got}");
            assert!(got.to_string().contains(text), "{status:?}: {got}");
            assert_eq!(matches!(got.answer(), Answer::Unreachable(_)), kind == "unreachable", "{status:?}");
        }
    }
}
