//! How deeply objects may nest. The real server reads JSON up to 10,000 levels (Go's
//! `encoding/json` limit); serde_json stops at 128, so a deep object was refused here while a
//! real server stores and serves it. Bodies are read to [`MAX_DEPTH`] levels instead, measured
//! first without recursion, and no object deeper than that is stored (a patch may deepen one):
//! every recursive walk over a stored object (serialisation, patches, schemas, managed
//! fields, drop) then stays within a bounded stack, whatever clients send.

use serde_json::Value;

/// The most levels of nesting an object may have here (the real server: 10,000). Each level
/// costs a few hundred bytes of stack in the deepest walk, so objects this deep are served on
/// 2 MiB threads, debug builds included.
pub const MAX_DEPTH: usize = 2000;

/// Go's message for a document nested too deeply.
pub const TOO_DEEP: &str = "exceeded max depth";

/// How deeply the arrays and objects of JSON text nest, counted without recursion (brackets
/// in strings do not count).
pub fn of_text(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// How deeply a value nests, counted without recursion.
pub fn of_value(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        deepest = deepest.max(d + 1);
        stack.extend(children.map(|c| (c, d + 1)));
    }
    deepest
}

/// Why JSON text was not read.
#[derive(Debug)]
pub enum Unread {
    /// Deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Not JSON.
    Json(serde_json::Error),
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unread::TooDeep => f.write_str(TOO_DEEP),
            Unread::Json(e) => e.fmt(f),
        }
    }
}

/// Parses JSON text nested at most [`MAX_DEPTH`] levels.
pub fn from_slice(bytes: &[u8]) -> Result<Value, Unread> {
    from_slice_within(bytes, MAX_DEPTH)
}

/// Parses JSON text nested at most `max` levels (a record that holds an object is one
/// level deeper than the object).
pub fn from_slice_within(bytes: &[u8], max: usize) -> Result<Value, Unread> {
    if of_text(bytes) > max {
        return Err(Unread::TooDeep);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // The depth is bounded above, so the parser's recursion is too.
    de.disable_recursion_limit();
    let value = serde::Deserialize::deserialize(&mut de).map_err(Unread::Json)?;
    de.end().map_err(Unread::Json)?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn depths_are_counted_without_recursion_and_bodies_read_to_the_limit() {
        for (text, want) in [("1", 0), ("[]", 1), (r#"{"a":[{"b":"]]]{{{"}]}"#, 3), (r#"["\"[", [[]]]"#, 3)] {
            assert_eq!(of_text(text.as_bytes()), want, "{text}");
            assert_eq!(of_value(&serde_json::from_str(text).unwrap()), want, "{text}");
        }
        let deepest = from_slice(nested(MAX_DEPTH).as_bytes()).unwrap();
        assert_eq!(of_value(&deepest), MAX_DEPTH);
        assert!(matches!(from_slice(nested(MAX_DEPTH + 1).as_bytes()), Err(Unread::TooDeep)));
        assert!(matches!(from_slice(nested(1_000_000).as_bytes()), Err(Unread::TooDeep)));
        assert!(matches!(from_slice(b"[1,"), Err(Unread::Json(_))));
    }
}
