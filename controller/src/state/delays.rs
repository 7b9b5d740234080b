//! Delays and times that come from outside (handler servers' answers, handlers' options),
//! validated and clamped here and nowhere else. The ground floor of `state/`.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// The longest delay honoured; longer ones (a handler asking for "never") are cut to it.
pub const MAX_DELAY: Duration = Duration::from_secs(366 * 24 * 3600);

/// Validates a number of seconds that came from outside (a handler's answer or options):
/// `None` stays `None`, negative or non-finite values are an error that names the value, and
/// values beyond [`MAX_DELAY`] are clamped to it.
pub fn seconds(value: Option<f64>, what: &'static str) -> Result<Option<Duration>, BadSeconds> {
    match value {
        None => Ok(None),
        Some(s) if !s.is_finite() || s < 0.0 => Err(BadSeconds { what, value: s }),
        Some(s) if s >= MAX_DELAY.as_secs_f64() => Ok(Some(MAX_DELAY)),
        Some(s) => Ok(Some(Duration::from_secs_f64(s))),
    }
}

/// A number of seconds that is no duration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{what}` must be a finite number of seconds ≥ 0, not {value}")]
pub struct BadSeconds {
    /// The field.
    pub what: &'static str,
    /// Its value.
    pub value: f64,
}

/// `now + d` without overflow (capped at chrono's maximum).
pub fn later(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(d).ok().and_then(|d| now.checked_add_signed(d)).unwrap_or(DateTime::<Utc>::MAX_UTC)
}
