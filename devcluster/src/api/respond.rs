//! Answers: JSON bodies with their warnings, plain text, and `Status` errors as the real server
//! writes them.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::Value;

use crate::status::ApiError;

/// A JSON answer from bytes.
pub fn bytes_response(code: u16, body: Bytes, warnings: &[String]) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for w in warnings {
        if let Some(v) = warning(w) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

/// A `Warning` header value: `299 - "text"`.
pub(super) fn warning(text: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("299 - {}", serde_json::to_string(text).unwrap_or_default())).ok()
}

/// Put `text` before the answer's other warnings, as the real server's handler for a
/// deprecated kind adds its warning before the request is served.
pub(super) fn warn_first(response: &mut Response, text: &str) {
    let Some(first) = warning(text) else {
        return;
    };
    let headers = response.headers_mut();
    let rest: Vec<HeaderValue> = headers.get_all(header::WARNING).iter().cloned().collect();
    headers.insert(header::WARNING, first);
    for v in rest {
        headers.append(header::WARNING, v);
    }
}

/// A JSON answer.
pub fn json_response(code: u16, body: &Value, warnings: &[String]) -> Response {
    bytes_response(code, Bytes::from(serde_json::to_vec(body).unwrap_or_default()), warnings)
}

/// A plain-text answer.
pub fn text(code: u16, body: &str) -> Response {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// An error answer.
pub fn error(e: &ApiError) -> Response {
    if e.plain {
        return text(404, "404 page not found");
    }
    json_response(e.code, &e.to_status(), &e.warnings)
}
