//! How a handler says it failed: Kopf's `TemporaryError` and `PermanentError`, and any other
//! error, which the controller treats according to the handler's [`ErrorsMode`](crate::ErrorsMode).
//!
//! A handler returns `Result<T, HandlerError>`. `?` converts every `std::error::Error` (and
//! `anyhow::Error` with the default `anyhow` feature) into [`HandlerError`]; a
//! [`TemporaryError`] or [`PermanentError`] keeps its meaning through that conversion, even
//! when it was wrapped in a `Box<dyn Error>` or an `anyhow::Error` on the way.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

/// A boxed error of any kind.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// The handler failed, but may succeed later: it is retried after [`delay`](Self::delay)
/// (default: the handler's backoff). Kopf's `kopf.TemporaryError`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct TemporaryError {
    message: String,
    delay: Option<Duration>,
}

impl TemporaryError {
    /// A temporary error with this message, retried after the handler's backoff.
    pub fn new(message: impl Into<String>) -> Self {
        TemporaryError { message: message.into(), delay: None }
    }

    /// Retries after `delay` instead of the handler's backoff.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The requested delay before the next attempt, if any.
    pub fn retry_delay(&self) -> Option<Duration> {
        self.delay
    }
}

/// The handler failed and must not be retried for this cause. Kopf's `kopf.PermanentError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PermanentError {
    message: String,
    code: Option<i32>,
}

impl PermanentError {
    /// A permanent error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        PermanentError { message: message.into(), code: None }
    }

    /// For admission handlers: the HTTP code of the denial (400 unless given; 400–599 are
    /// passed on), as Kopf's `kopf.AdmissionError(message, code=…)`.
    pub fn code(mut self, code: i32) -> Self {
        self.code = Some(code);
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The denial's HTTP code, if one is given.
    pub fn denial_code(&self) -> Option<i32> {
        self.code
    }
}

/// Why a handler failed: what a handler returns in `Err`.
///
/// Deliberately not a `std::error::Error` itself, so that `?` can convert every error into it.
#[derive(Debug)]
pub enum HandlerError {
    /// Retry later.
    Temporary(TemporaryError),
    /// Never retry for this cause.
    Permanent(PermanentError),
    /// Anything else; the handler's errors mode decides (Kopf's arbitrary exceptions).
    Unexpected(BoxError),
}

impl HandlerError {
    /// An unexpected error with a plain message, for handlers that have no error type at hand.
    pub fn unexpected(message: impl Into<String>) -> Self {
        HandlerError::Unexpected(message.into().into())
    }

    /// Classifies a boxed error: temporary and permanent errors keep their meaning.
    pub fn from_boxed(error: BoxError) -> Self {
        let error = match error.downcast::<TemporaryError>() {
            Ok(e) => return HandlerError::Temporary(*e),
            Err(other) => other,
        };
        match error.downcast::<PermanentError>() {
            Ok(e) => HandlerError::Permanent(*e),
            Err(other) => HandlerError::Unexpected(other),
        }
    }

    /// The message sent to the controller: for unexpected errors, the whole chain of sources
    /// joined with `: `.
    pub fn message(&self) -> String {
        match self {
            HandlerError::Temporary(e) => e.message.clone(),
            HandlerError::Permanent(e) => e.message.clone(),
            HandlerError::Unexpected(e) => {
                let mut message = e.to_string();
                let mut source = e.source();
                while let Some(s) = source {
                    let text = s.to_string();
                    if !message.ends_with(&text) {
                        message.push_str(": ");
                        message.push_str(&text);
                    }
                    source = s.source();
                }
                message
            }
        }
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            HandlerError::Temporary(_) => "temporary error",
            HandlerError::Permanent(_) => "permanent error",
            HandlerError::Unexpected(_) => "unexpected error",
        };
        write!(f, "{kind}: {}", self.message())
    }
}

impl<E: StdError + Send + Sync + 'static> From<E> for HandlerError {
    fn from(error: E) -> Self {
        HandlerError::from_boxed(Box::new(error))
    }
}

#[cfg(feature = "anyhow")]
impl From<HandlerError> for anyhow::Error {
    fn from(error: HandlerError) -> Self {
        match error {
            HandlerError::Temporary(e) => anyhow::Error::new(e),
            HandlerError::Permanent(e) => anyhow::Error::new(e),
            HandlerError::Unexpected(e) => anyhow::Error::from_boxed(e),
        }
    }
}

/// Converts `anyhow::Error` (with the `anyhow` feature): a wrapped [`TemporaryError`] or
/// [`PermanentError`] keeps its meaning; the message of anything else includes its context chain.
#[cfg(feature = "anyhow")]
pub fn from_anyhow(error: anyhow::Error) -> HandlerError {
    let error = match error.downcast::<TemporaryError>() {
        Ok(e) => return HandlerError::Temporary(e),
        Err(other) => other,
    };
    match error.downcast::<PermanentError>() {
        Ok(e) => HandlerError::Permanent(e),
        Err(other) => HandlerError::unexpected(format!("{other:#}")),
    }
}

/// Classifies any failure in one call: `fetch().await.temporary()?`.
///
/// Handy for `anyhow::Error`, which `?` cannot convert into [`HandlerError`] directly (use
/// [`from_anyhow`] to keep a wrapped temporary or permanent error's meaning instead).
pub trait ResultExt<T> {
    /// Fails temporarily with the error's message, retried after the handler's backoff.
    fn temporary(self) -> Result<T, HandlerError>;
    /// Fails temporarily with the error's message, retried after `delay`.
    fn temporary_after(self, delay: Duration) -> Result<T, HandlerError>;
    /// Fails permanently with the error's message.
    fn permanent(self) -> Result<T, HandlerError>;
}

impl<T, E: fmt::Display> ResultExt<T> for Result<T, E> {
    fn temporary(self) -> Result<T, HandlerError> {
        self.map_err(|e| HandlerError::Temporary(TemporaryError::new(format!("{e:#}"))))
    }

    fn temporary_after(self, delay: Duration) -> Result<T, HandlerError> {
        self.map_err(|e| HandlerError::Temporary(TemporaryError::new(format!("{e:#}")).delay(delay)))
    }

    fn permanent(self) -> Result<T, HandlerError> {
        self.map_err(|e| HandlerError::Permanent(PermanentError::new(format!("{e:#}"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    fn classify(e: HandlerError) -> (&'static str, String) {
        let kind = match e {
            HandlerError::Temporary(_) => "temporary",
            HandlerError::Permanent(_) => "permanent",
            HandlerError::Unexpected(_) => "unexpected",
        };
        (kind, e.message())
    }

    #[test]
    fn errors_keep_their_meaning_through_conversions() {
        let io = || std::io::Error::other("disk full");
        let table: Vec<(HandlerError, &str, &str)> = vec![
            (TemporaryError::new("later").into(), "temporary", "later"),
            (PermanentError::new("never").into(), "permanent", "never"),
            (HandlerError::from_boxed(Box::new(TemporaryError::new("boxed"))), "temporary", "boxed"),
            (io().into(), "unexpected", "disk full"),
            (Outer(io()).into(), "unexpected", "outer: disk full"),
            (HandlerError::unexpected("plain"), "unexpected", "plain"),
        ];
        for (error, kind, message) in table {
            assert_eq!(classify(error), (kind, message.to_string()));
        }
    }

    #[test]
    fn any_displayable_error_can_be_declared_temporary_or_permanent() {
        let failing = || Err::<(), _>("no route to host");
        assert_eq!(classify(failing().temporary().unwrap_err()), ("temporary", "no route to host".into()));
        assert_eq!(classify(failing().permanent().unwrap_err()), ("permanent", "no route to host".into()));
        match failing().temporary_after(Duration::from_secs(5)).unwrap_err() {
            HandlerError::Temporary(e) => assert_eq!(e.retry_delay(), Some(Duration::from_secs(5))),
            other => panic!("expected a temporary error, got {other}"),
        }
    }

    #[cfg(feature = "anyhow")]
    #[test]
    fn anyhow_errors_keep_their_meaning_and_context() {
        let temporary = anyhow::Error::new(TemporaryError::new("later").delay(Duration::from_secs(2)));
        match from_anyhow(temporary) {
            HandlerError::Temporary(e) => assert_eq!(e.retry_delay(), Some(Duration::from_secs(2))),
            other => panic!("expected a temporary error, got {other}"),
        }
        let contextual = anyhow::anyhow!("inner").context("outer");
        assert_eq!(classify(from_anyhow(contextual)), ("unexpected", "outer: inner".into()));
    }
}
