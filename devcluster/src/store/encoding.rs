//! A stored object's bytes: its JSON serialized once, split where its resourceVersion goes so
//! that a write puts the version in by copying, and the lines of watch events.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

use crate::meta::set_rv;

/// A stored object: its JSON value and cached serialization.
#[derive(Debug)]
pub struct Obj {
    /// The object as stored (core shape for Events).
    pub value: Value,
    /// The object serialized as JSON.
    pub bytes: Bytes,
    /// Length of the leading `{"kind":..,"apiVersion":..,` that list items leave out (0: keep all).
    pub type_prefix: usize,
    /// The object's resourceVersion.
    pub rv: u64,
}

impl Obj {
    /// Serialize `value`; `strip_type` remembers where kind/apiVersion end for list items.
    pub fn new(value: Value, rv: u64, strip_type: bool) -> Arc<Obj> {
        let bytes = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        let type_prefix = if strip_type { type_prefix_len(&value) } else { 0 };
        Arc::new(Obj { value, bytes, type_prefix, rv })
    }

    /// Append the object as a list item (without kind/apiVersion for built-ins).
    pub fn write_item(&self, out: &mut BytesMut) {
        if self.type_prefix > 0 {
            out.put_u8(b'{');
            out.put_slice(&self.bytes[self.type_prefix..]);
        } else {
            out.put_slice(&self.bytes);
        }
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        crate::registry::namespace_of(&self.value)
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        crate::registry::name_of(&self.value)
    }
}

/// Length of `{"kind":K,"apiVersion":A,` if the object starts with exactly those keys.
fn type_prefix_len(value: &Value) -> usize {
    let Some(map) = value.as_object() else {
        return 0;
    };
    let mut keys = map.iter();
    let (Some((k1, v1)), Some((k2, v2)), Some(_)) = (keys.next(), keys.next(), keys.next()) else {
        return 0;
    };
    if k1 != "kind" || k2 != "apiVersion" {
        return 0;
    }
    let l1 = serde_json::to_string(v1).map(|s| s.len()).unwrap_or(0);
    let l2 = serde_json::to_string(v2).map(|s| s.len()).unwrap_or(0);
    // {"kind":  + v1 + ,"apiVersion": + v2 + ,
    1 + 7 + l1 + 14 + l2 + 1
}

/// Encode one watch event line.
pub fn encode_event(kind: &str, object: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(object.len() + 32);
    out.put_slice(b"{\"type\":\"");
    out.put_slice(kind.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
    out.freeze()
}

/// An object's JSON split where its resourceVersion's value goes: the version is handed out
/// under the table's lock, and putting it in is then a copy, not a serialization.
#[derive(Debug)]
pub(super) struct Encoded {
    /// Up to and including `"resourceVersion":` (the whole object if it has no metadata).
    head: Vec<u8>,
    /// What follows the version's value (`None`: the object has no metadata to put it in).
    tail: Option<Vec<u8>>,
}

impl Encoded {
    /// Serialize `value`, with `metadata.resourceVersion` where the object will carry it.
    pub(super) fn new(mut value: Value) -> (Value, Encoded) {
        set_rv(&mut value, 0); // its place among the metadata keys
        let mut out = Encoded { head: Vec::with_capacity(256), tail: None };
        let Some(map) = value.as_object() else {
            out.head = serde_json::to_vec(&value).unwrap_or_default();
            return (value, out);
        };
        out.head.push(b'{');
        for (i, (k, v)) in map.iter().enumerate() {
            let buf = out.buf();
            write_key(buf, i, k);
            match v.as_object() {
                Some(meta) if k == "metadata" => {
                    buf.push(b'{');
                    for (j, (mk, mv)) in meta.iter().enumerate() {
                        let buf = out.buf();
                        write_key(buf, j, mk);
                        if mk == "resourceVersion" {
                            out.tail = Some(Vec::with_capacity(256));
                        } else {
                            let _ = serde_json::to_writer(&mut *buf, mv);
                        }
                    }
                    out.buf().push(b'}');
                }
                _ => {
                    let _ = serde_json::to_writer(&mut *buf, v);
                }
            }
        }
        out.buf().push(b'}');
        (value, out)
    }

    /// The buffer being written: the head until the version's place, then the tail.
    pub(super) fn buf(&mut self) -> &mut Vec<u8> {
        self.tail.as_mut().unwrap_or(&mut self.head)
    }

    /// The length of the object's JSON, but for the version's digits.
    pub(super) fn len(&self) -> usize {
        self.head.len() + self.tail.as_ref().map_or(0, |t| t.len() + 2)
    }

    /// The stored object at version `rv`.
    pub(super) fn into_obj(self, mut value: Value, rv: u64, strip_type: bool) -> Arc<Obj> {
        let bytes = match self.tail {
            None => Bytes::from(self.head),
            Some(tail) => {
                let digits = rv.to_string();
                let mut out = BytesMut::with_capacity(self.head.len() + digits.len() + 2 + tail.len());
                out.put_slice(&self.head);
                out.put_u8(b'"');
                out.put_slice(digits.as_bytes());
                out.put_u8(b'"');
                out.put_slice(&tail);
                out.freeze()
            }
        };
        set_rv(&mut value, rv);
        let type_prefix = if strip_type { type_prefix_len(&value) } else { 0 };
        Arc::new(Obj { value, bytes, type_prefix, rv })
    }
}

/// `,"key":` (without the comma for the first key of an object).
fn write_key(buf: &mut Vec<u8>, index: usize, key: &str) {
    if index > 0 {
        buf.push(b',');
    }
    let _ = serde_json::to_writer(&mut *buf, key);
    buf.push(b':');
}

/// The length of `value` serialized as JSON, without keeping the bytes.
pub fn encoded_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}
