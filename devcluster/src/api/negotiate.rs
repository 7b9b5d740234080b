//! The answer's shape from the `Accept` header, as the real server negotiates it: the whole
//! object (the default), a `Table` (kubectl get), or `PartialObjectMetadata` and
//! `PartialObjectMetadataList` (metadata-only clients: client-go's metadata informers, kube-rs
//! `Api::{get,list,watch,patch}_metadata`).

use axum::body::Body;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::respond::{error, json_response};
use crate::status::ApiError;

/// The shape a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The object or list as stored.
    Object,
    /// A `meta.k8s.io` Table.
    Table,
    /// `PartialObjectMetadata` (`list: false`) or `PartialObjectMetadataList`, in
    /// `meta.k8s.io/<version>`.
    Metadata {
        /// Whether the client asked for the list kind.
        list: bool,
        /// `v1` or `v1beta1`.
        version: &'static str,
    },
}

/// One media range of an `Accept` header, with the parameters the API server reads.
#[derive(Debug)]
pub struct MediaRange<'a> {
    /// `type/subtype`, in lower case (`application/json`, `*/*`).
    pub media: String,
    /// `g=`: the group of the conversion asked for.
    pub group: Option<&'a str>,
    /// `v=`: its version.
    pub version: Option<&'a str>,
    /// `as=`: its kind.
    pub kind: Option<&'a str>,
}

/// The media ranges of an `Accept` header in the order a server tries them (as goautoneg,
/// which the real server uses, orders them): by quality, specific ranges before wildcards of
/// the same quality, then as written. A quality of 0, or one that is not a number, refuses
/// the range: it is left out.
pub fn media_ranges(accept: &str) -> Vec<MediaRange<'_>> {
    let mut ranges: Vec<(f32, u8, MediaRange)> = Vec::new();
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut r = MediaRange { media, group: None, version: None, kind: None };
        let mut q = 1.0f32;
        for param in parts {
            let (k, v) = param.split_once('=').map_or((param, ""), |(k, v)| (k.trim(), v.trim().trim_matches('"')));
            match k.to_ascii_lowercase().as_str() {
                "q" => q = v.parse().unwrap_or(0.0),
                "g" => r.group = Some(v),
                "v" => r.version = Some(v),
                "as" => r.kind = Some(v),
                _ => {}
            }
        }
        let wildcards = u8::from(r.media.starts_with("*/")) + u8::from(r.media.ends_with("/*"));
        if q > 0.0 {
            ranges.push((q, wildcards, r));
        }
    }
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    ranges.into_iter().map(|(_, _, r)| r).collect()
}

/// The shape the `Accept` header asks for: the first of its [`media_ranges`] this server can
/// answer. JSON, YAML, protobuf and wildcards are all answered with JSON; a range whose `as=`
/// names nothing known is passed over. Without any answerable range the whole object is sent
/// (the real server answers 406; clients always offer plain JSON last, and `curl` sends
/// `*/*`).
pub fn shape(accept: Option<&str>) -> Shape {
    let answerable = |media: &str| {
        matches!(media, "application/json" | "application/yaml" | "application/vnd.kubernetes.protobuf" | "application/*" | "*/*")
    };
    let meta_version = |v: Option<&str>| match v {
        Some("v1") => Some("v1"),
        Some("v1beta1") => Some("v1beta1"),
        _ => None,
    };
    let ranges = media_ranges(accept.unwrap_or(""));
    let mut shapes = ranges.iter().filter(|r| answerable(&r.media)).filter_map(|r| {
        let meta = r.group == Some("meta.k8s.io");
        match (r.kind, meta, meta_version(r.version)) {
            (None, _, _) => Some(Shape::Object),
            (Some("Table"), true, Some(_)) => Some(Shape::Table),
            (Some("PartialObjectMetadata"), true, Some(version)) => Some(Shape::Metadata { list: false, version }),
            (Some("PartialObjectMetadataList"), true, Some(version)) => Some(Shape::Metadata { list: true, version }),
            _ => None,
        }
    });
    shapes.next().unwrap_or(Shape::Object)
}

/// The `PartialObjectMetadata` of an object.
pub fn partial(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// Turn a finished JSON answer (an object or a list) into the metadata shape asked for. Errors
/// (`Status`) pass unchanged; asking for the list kind of one object, or the reverse, is the
/// real server's 406.
pub async fn transform(response: Response, list: bool, version: &'static str) -> Response {
    if !response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return error(&ApiError::internal("the answer could not be read"));
    };
    let Ok(value) = crate::depth::from_slice(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let is_list = value.get("items").is_some_and(Value::is_array);
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("unstructured.Unstructured");
    let out = match (list, is_list) {
        (false, false) => partial(&value, version),
        (true, true) => {
            let mut meta = Map::new();
            for k in ["resourceVersion", "continue", "remainingItemCount"] {
                if let Some(v) = value["metadata"].get(k) {
                    meta.insert(k.into(), v.clone());
                }
            }
            let items: Vec<Value> = value["items"].as_array().into_iter().flatten().map(|i| partial(i, version)).collect();
            json!({"kind": "PartialObjectMetadataList", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": meta, "items": items})
        }
        (false, true) => {
            return error(&ApiError::not_acceptable(format!(
                "you requested PartialObjectMetadata, but the requested object is a list (*{kind})"
            )));
        }
        (true, false) => {
            return error(&ApiError::not_acceptable(format!(
                "you requested PartialObjectMetadataList, but the requested object is not a list (*{kind})"
            )));
        }
    };
    let mut response = json_response(parts.status.as_u16(), &out, &[]);
    for w in parts.headers.get_all(http::header::WARNING) {
        response.headers_mut().append(http::header::WARNING, w.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_answerable_media_type_by_preference_decides_the_shape() {
        let meta = |list| Shape::Metadata { list, version: "v1" };
        let cases = [
            (None, Shape::Object),
            (Some("application/json"), Shape::Object),
            (Some("*/*"), Shape::Object),
            (Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"), meta(false)),
            (Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"), meta(true)),
            (
                Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"),
                Shape::Metadata { list: true, version: "v1beta1" },
            ),
            // client-go's metadata client: protobuf first, answered as JSON here
            (
                Some(
                    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
                ),
                meta(true),
            ),
            (
                Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"),
                Shape::Table,
            ),
            // an unknown `as`, group or version is passed over
            (Some("application/json;as=Nonsense;g=meta.k8s.io;v=v1,application/json"), Shape::Object),
            (Some("application/json;as=PartialObjectMetadata;g=example.com;v=v1,application/json"), Shape::Object),
            (Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v9"), Shape::Object),
            // q-values order the offers; q=0 is refused
            (Some("application/json;q=0.5,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"), meta(false)),
            (Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1;q=0,application/json"), Shape::Object),
            (Some("text/html"), Shape::Object),
            // a wildcard comes after a specific range of the same quality; a q that is no number refuses
            (Some("*/*,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"), meta(false)),
            (Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1;q=x,application/json"), Shape::Object),
            (Some("application/json; as=PartialObjectMetadata; g=meta.k8s.io; v=v1"), meta(false)),
        ];
        for (accept, want) in cases {
            assert_eq!(shape(accept), want, "{accept:?}");
        }
    }
}
