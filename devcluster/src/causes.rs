//! Field errors as the real API server words them (`Status.details.causes`): the ground floor
//! under `status`, `schema` and the validation.

use serde_json::Value;

/// One entry of `Status.details.causes`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, ...
    pub reason: &'static str,
    /// The cause's own message (without the field).
    pub message: String,
    /// The field path, e.g. `metadata.name`.
    pub field: String,
}

impl Cause {
    /// A cause with the given reason, message and field.
    pub fn new(reason: &'static str, message: impl Into<String>, field: impl Into<String>) -> Self {
        Cause { reason, message: message.into(), field: field.into() }
    }
}

/// A value as the real server's field errors show it after `Invalid value:`: a string
/// quoted, anything else as JSON.
pub fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}
