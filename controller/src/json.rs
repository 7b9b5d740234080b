//! JSON from outside, read to a depth of our choosing. serde_json refuses documents nested
//! deeper than 128 levels; the API server accepts objects up to 10,000 levels (Go's
//! `encoding/json` limit), so one deep object would fail the whole list page or watch event
//! it came in. Here the depth is measured first, without recursion, and a document within
//! [`MAX_DEPTH`] is parsed with serde_json's own limit lifted: every recursive walk over a
//! value the controller makes (essence, diff, patches, serialisation, drop) then stays within
//! a bounded stack. Deeper documents are that document's error ([`Error::TooDeep`]).

use serde_json::Value;

/// The most levels of nesting the controller reads in an object (the API server accepts up to
/// 10,000; objects deeper than this are skipped with a warning). A level costs at most a few
/// hundred bytes of stack in each recursive walk, so 1,000 levels stay well within a 2 MiB
/// thread stack, debug builds included.
pub const MAX_DEPTH: usize = 1000;

/// Why a document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("the JSON is nested {depth} levels deep, deeper than the {MAX_DEPTH} levels the controller reads")]
    TooDeep {
        /// Its depth.
        depth: usize,
    },
    /// Not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// How deeply the arrays and objects of JSON text nest (0 for a scalar), counted without
/// recursion and without parsing: brackets inside strings do not count. On malformed text the
/// count is of the brackets seen, which the parser then refuses anyway.
pub fn depth(text: &[u8]) -> usize {
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

/// Parses JSON text nested at most [`MAX_DEPTH`] levels.
pub fn from_slice(bytes: &[u8]) -> Result<Value, Error> {
    let depth = depth(bytes);
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep { depth });
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // The depth is bounded above, so the parser's recursion is too.
    de.disable_recursion_limit();
    let value = serde::Deserialize::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// [`from_slice`] for text.
pub fn from_str(text: &str) -> Result<Value, Error> {
    from_slice(text.as_bytes())
}

/// A JSON value of `depth` levels (`[[[…]]]`), built without recursion: for tests.
#[cfg(test)]
pub fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn depth_counts_brackets_outside_strings() {
        let cases = [
            ("1", 0),
            ("[]", 1),
            (r#"{"a": [1, {"b": {}}]}"#, 4),
            (r#"{"a": "[[[[{{{"}"#, 1),
            (r#"{"a": "\"[[[", "b": [[]]}"#, 3),
            (r#"["\\", [[]]]"#, 3),
            ("]]]]", 0),
        ];
        for (text, want) in cases {
            assert_eq!(depth(text.as_bytes()), want, "{text}");
        }
    }

    #[test]
    fn documents_up_to_the_limit_parse_and_deeper_ones_are_refused() {
        assert!(serde_json::from_str::<Value>(&nested(200)).is_err(), "serde_json alone refuses 200 levels");
        let v = from_str(&nested(MAX_DEPTH)).expect("the limit parses");
        assert_eq!(serde_json::to_string(&v).unwrap().len(), 2 * MAX_DEPTH);
        match from_str(&nested(MAX_DEPTH + 1)) {
            Err(Error::TooDeep { depth }) => assert_eq!(depth, MAX_DEPTH + 1),
            other => panic!("{other:?}"),
        }
        assert!(matches!(from_str(&nested(100_000)), Err(Error::TooDeep { .. })), "no stack is spent on it");
        assert!(matches!(from_str("[1,"), Err(Error::Json(_))));
        assert!(matches!(from_str("[1] x"), Err(Error::Json(_))), "trailing text");
    }

    proptest! {
        #[test]
        fn any_text_is_read_or_refused_and_json_reads_back_as_itself(text in ".{0,64}", value in crate::state::arbitrary::json()) {
            let _ = from_str(&text);
            let encoded = serde_json::to_string(&value).unwrap();
            prop_assert_eq!(from_str(&encoded).unwrap(), value);
        }
    }
}
