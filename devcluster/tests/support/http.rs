//! One request over real HTTP to a dev cluster, shared by the test files that check answers
//! byte for byte.

use std::time::Duration;

use bosun_devcluster::DevCluster;
use http_body_util::BodyExt;
use serde_json::Value;

/// Sends one request; the status, the content type and the body (whole, or the first frame of
/// a stream when `first_frame`). kube-rs's own retries are off: a 429 or 503 is an answer these
/// tests check, not one to wait out.
pub async fn send(
    dc: &DevCluster,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Option<Value>,
    first_frame: bool,
) -> (u16, String, String) {
    let mut config = dc.kube_config();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let mut req = http::Request::builder().method(method).uri(path).header("accept", "application/json");
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let body = body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default();
    let resp = client.send(req.body(body).unwrap().map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let mut body = resp.into_body();
    let bytes = if first_frame {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame()).await.expect("a first frame in time");
        frame.and_then(Result::ok).and_then(|f| f.into_data().ok()).unwrap_or_default()
    } else {
        body.collect().await.unwrap().to_bytes()
    };
    (code, ct, String::from_utf8_lossy(&bytes).into_owned())
}
