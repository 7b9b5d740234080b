//! Compact JSON as Kopf writes its diffbase (Python's `json.dumps(essence, separators=(',',
//! ':'))`), so that the annotation Bosun writes in Kopf's place is byte for byte the one Kopf
//! writes for the same object: characters beyond ASCII (and DEL) escaped as `\uXXXX` (UTF-16,
//! lowercase hex: Python's `ensure_ascii`), and floats as Python's `repr` writes them (`1e-05`,
//! `1e+16`, fixed notation only for decimal exponents from -4 to 16). serde_json already
//! writes everything else the same way (key order kept, the same escapes of control
//! characters, `1.0` for integral floats). Integers beyond 64 bits, which serde_json reads as
//! floats, are the one difference left.

use std::fmt::Write;

use serde_json::Value;

/// `value` as compact JSON, written as Kopf writes it.
pub(super) fn to_string(value: &Value) -> String {
    let compact = serde_json::to_string(value).expect("JSON values always serialize");
    let mut out = String::with_capacity(compact.len());
    let mut rest = compact.as_str();
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            let end = string_end(rest);
            ascii_only(&rest[..end], &mut out);
            rest = &rest[end..];
        } else if c == '-' || c.is_ascii_digit() {
            let end = rest.find(|c: char| !matches!(c, '0'..='9' | '-' | '+' | '.' | 'e' | 'E')).unwrap_or(rest.len());
            python_number(&rest[..end], &mut out);
            rest = &rest[end..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The length of the JSON string at the start of `s` (from its opening quote to its closing
/// one, both included).
fn string_end(s: &str) -> usize {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return i + 1,
            _ => {}
        }
    }
    s.len()
}

/// A JSON string with every character beyond `~` escaped as Python's `ensure_ascii` does.
fn ascii_only(s: &str, out: &mut String) {
    for c in s.chars() {
        if c > '~' {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
}

/// A JSON number as Python writes it: integers as they are, floats as `repr(float)`.
fn python_number(token: &str, out: &mut String) {
    let (sign, unsigned) = token.strip_prefix('-').map_or(("", token), |u| ("-", u));
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.trim_start_matches('+').parse::<i32>().ok()),
        None => (unsigned, Some(0)),
    };
    let Some(exponent) = exponent.filter(|_| token.contains(['.', 'e', 'E'])) else {
        out.push_str(token); // An integer, or nothing serde_json writes.
        return;
    };
    // The significant digits, and where the decimal point goes among them.
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    if digits.is_empty() {
        out.push_str(token); // Zero: `0.0` or `-0.0`, as Python writes it.
        return;
    }
    let point = int.len() as i32 - leading as i32 + exponent;
    out.push_str(sign);
    if (-3..=16).contains(&point) {
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', point.unsigned_abs() as usize));
            out.push_str(digits);
        } else if point as usize >= digits.len() {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
            out.push_str(".0");
        } else {
            let (whole, part) = digits.split_at(point as usize);
            let _ = write!(out, "{whole}.{part}");
        }
    } else {
        let (first, more) = digits.split_at(1);
        out.push_str(first);
        if !more.is_empty() {
            let _ = write!(out, ".{more}");
        }
        let e = point - 1;
        let _ = write!(out, "e{}{:02}", if e < 0 { '-' } else { '+' }, e.unsigned_abs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_and_floats_are_written_as_python_writes_them() {
        // (value, Python 3's `json.dumps(value, separators=(',', ':'))`)
        let cases = [
            (json!({"a": [1, -2, 3.5, true, false, null]}), r#"{"a":[1,-2,3.5,true,false,null]}"#),
            (json!("ü<>&/\u{2028}\u{7f}"), r#""\u00fc<>&/\u2028\u007f""#),
            (json!("😀 e1 \"q\" \\ \n\u{1}"), r#""\ud83d\ude00 e1 \"q\" \\ \n\u0001""#),
            (json!({"é": "x"}), r#"{"\u00e9":"x"}"#),
            (json!(1.0), "1.0"),
            (json!(-0.0), "-0.0"),
            (json!(0.0), "0.0"),
            (json!(0.0001), "0.0001"),
            (json!(0.00001), "1e-05"),
            (json!(-1.5e-7), "-1.5e-07"),
            (json!(1e15), "1000000000000000.0"),
            (json!(1e16), "1e+16"),
            (json!(1.2345678901234568e17), "1.2345678901234568e+17"),
            (json!(1e100), "1e+100"),
            (json!(123.456), "123.456"),
            (json!(5e-324), "5e-324"),
            (json!(u64::MAX), "18446744073709551615"),
            (json!(i64::MIN), "-9223372036854775808"),
        ];
        for (value, python) in cases {
            assert_eq!(to_string(&value), python, "{value}");
            assert_eq!(serde_json::from_str::<Value>(&to_string(&value)).unwrap(), value, "round trip of {value}");
        }
    }

    #[test]
    fn what_is_written_reads_back_as_the_same_value() {
        // A seeded walk over nested values of every kind (no crate of chance needed).
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        fn value(next: &mut impl FnMut() -> u64, depth: u32) -> Value {
            match next() % if depth > 3 { 6 } else { 8 } {
                0 => Value::Null,
                1 => Value::Bool(next().is_multiple_of(2)),
                2 => json!(next() as i64),
                3 => json!(f64::from_bits(next()) % 1e300).as_f64().map_or(Value::Null, |f| json!(f)),
                4 => json!((next() % 100_000) as f64 / 1000.0),
                5 => Value::String((0..next() % 6).filter_map(|_| char::from_u32((next() % 0x1_0000) as u32)).collect()),
                6 => Value::Array((0..next() % 4).map(|_| value(next, depth + 1)).collect()),
                _ => Value::Object((0..next() % 4).map(|i| (format!("k{i}é"), value(next, depth + 1))).collect()),
            }
        }
        for _ in 0..2000 {
            let v = value(&mut next, 0);
            let text = to_string(&v);
            assert!(text.is_ascii(), "{text}");
            // As serde_json reads its own spelling back (without its `float_roundtrip`, the
            // last bit of some floats differs either way).
            let plain = serde_json::to_string(&v).unwrap();
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), serde_json::from_str::<Value>(&plain).unwrap(), "{text}");
        }
    }
}
