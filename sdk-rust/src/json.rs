//! JSON as bytes: the contract's encoding of objects and every free-form value. Empty bytes
//! mean "not given"; the literal `null` means "given, and null".

use serde::Serialize;
use serde_json::Value;

/// Encodes a value that is already JSON (or made of JSON values): this cannot fail.
pub(crate) fn encode(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("JSON values always serialize")
}

/// Decodes an optional value: empty bytes are `None`.
pub(crate) fn decode_opt(bytes: &[u8]) -> Result<Option<Value>, serde_json::Error> {
    if bytes.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(bytes).map(Some)
}
