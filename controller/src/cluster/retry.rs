//! When to send a failed API request again: Kopf's policy, the controller's only retry layer
//! (the client retries nothing by itself, see `client`). Server errors (5xx), 429 Too Many
//! Requests and requests with no answer are retried after backoffs of 1, 1, 2, 3, 5, 8, 13,
//! 21 s; a `Retry-After` the server sends replaces the backoff, up to [`MAX_RETRY_AFTER`] so
//! that no answer of a server holds a request for longer. Pure: the loop is `Cluster::call`.

use std::time::Duration;

use http::{HeaderValue, StatusCode};

/// Kopf's backoffs for server errors and network failures.
pub const BACKOFFS: [u64; 8] = [1, 1, 2, 3, 5, 8, 13, 21];

/// The longest `Retry-After` honoured as given; longer ones are cut to it.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How one attempt ended, as far as retrying goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The server answered this status, with this `Retry-After`.
    Status(StatusCode, Option<Duration>),
    /// No answer: connection refused or lost, or the request timeout passed.
    NoAnswer,
}

/// How long to wait before attempt `attempt + 1` after attempt `attempt` (0-based) failed so,
/// with `retries` retries allowed in all; none when the failure is final.
pub fn wait(attempt: usize, retries: usize, failure: Failure) -> Option<Duration> {
    let backoff = Duration::from_secs(BACKOFFS[attempt.min(BACKOFFS.len() - 1)]);
    if attempt >= retries {
        return None;
    }
    match failure {
        Failure::Status(status, retry_after) if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() => {
            Some(retry_after.map_or(backoff, |d| d.min(MAX_RETRY_AFTER)))
        }
        Failure::Status(..) => None,
        Failure::NoAnswer => Some(backoff),
    }
}

impl Failure {
    /// Whether the API server may have applied the request all the same: no answer came (it
    /// may have been lost after the write), or a 5xx other than 503 (500, 504: the write may
    /// have happened before the failure). 429 and 503 are answered before anything is done.
    pub fn may_have_applied(self) -> bool {
        match self {
            Failure::NoAnswer => true,
            Failure::Status(status, _) => status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Whether a request may be sent again after a failure that [may have
/// applied](Failure::may_have_applied) it (`json_patch`: its body is a JSON patch). GET, PUT (a
/// resourceVersion makes a second one conflict), DELETE, POST (a create; a second one is 409
/// AlreadyExists, which its callers take) and merge, strategic and apply patches (applying one
/// twice is applying it once) may; a JSON patch may not (`add /spec/items/-` twice adds twice;
/// a `remove` twice is a 422 for a patch that landed) unless its first operation tests
/// `/metadata/resourceVersion`, so that a second landing is refused.
pub fn resendable(json_patch: bool, body: &[u8]) -> bool {
    if !json_patch {
        return true;
    }
    let Ok(serde_json::Value::Array(ops)) = serde_json::from_slice::<serde_json::Value>(body) else { return false };
    ops.first().is_some_and(|op| op["op"] == "test" && op["path"] == "/metadata/resourceVersion" && op["value"].is_string())
}

/// How a request through kube's typed API failed, for [`wait`]; none when retrying cannot
/// help (the answer came and could not be read).
pub fn failure_of(e: &kube::Error) -> Option<Failure> {
    match e {
        kube::Error::Api(s) => StatusCode::from_u16(s.code).ok().map(|code| Failure::Status(code, None)),
        kube::Error::HyperError(_) | kube::Error::Service(_) => Some(Failure::NoAnswer),
        _ => None,
    }
}

/// Sends a request through kube's typed API (`send` makes each attempt) with the same
/// retries as [`super::Cluster::call`], for the listings that are not the watcher's (the
/// watcher backs off and lists again by itself).
pub async fn kube<T, Fut>(retries: usize, mut send: impl FnMut() -> Fut) -> Result<T, kube::Error>
where
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 0;
    loop {
        let err = match send().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let Some(wait) = failure_of(&err).and_then(|f| wait(attempt, retries, f)) else { return Err(err) };
        tracing::warn!("{err}; retrying in {}s", wait.as_secs_f64());
        attempt += 1;
        tokio::time::sleep(wait).await;
    }
}

/// A `Retry-After` header as a duration: delay-seconds, as the API server sends it (an
/// HTTP date, which it never sends, reads as absent).
pub fn retry_after(value: &HeaderValue) -> Option<Duration> {
    value.to_str().ok()?.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_retried_after_kopfs_backoffs_or_the_servers_retry_after() {
        let s = |code: u16, after: Option<u64>| Failure::Status(StatusCode::from_u16(code).unwrap(), after.map(Duration::from_secs));
        let secs = |n: u64| Some(Duration::from_secs(n));
        let cases = [
            ("503, first", 0, 8, s(503, None), secs(1)),
            ("500, third", 2, 8, s(500, None), secs(2)),
            ("no answer, eighth", 7, 8, Failure::NoAnswer, secs(21)),
            ("beyond the list", 9, 20, Failure::NoAnswer, secs(21)),
            ("the last attempt", 8, 8, s(503, None), None),
            ("no retries", 0, 0, Failure::NoAnswer, None),
            ("429 with Retry-After", 0, 8, s(429, Some(7)), secs(7)),
            ("429 with Retry-After: 0", 3, 8, s(429, Some(0)), secs(0)),
            ("503 with Retry-After", 0, 8, s(503, Some(2)), secs(2)),
            ("a huge Retry-After", 0, 8, s(429, Some(u64::MAX)), Some(MAX_RETRY_AFTER)),
            ("429 without", 1, 8, s(429, None), secs(1)),
            ("409 is the caller's", 0, 8, s(409, None), None),
            ("404", 0, 8, s(404, Some(1)), None),
        ];
        for (what, attempt, retries, failure, want) in cases {
            assert_eq!(wait(attempt, retries, failure), want, "{what}");
        }
    }

    #[test]
    fn only_failures_before_the_write_are_sure_not_to_have_applied_it() {
        let s = |code: u16| Failure::Status(StatusCode::from_u16(code).unwrap(), None);
        let cases = [
            ("no answer", Failure::NoAnswer, true),
            ("500", s(500), true),
            ("504", s(504), true),
            ("503", s(503), false),
            ("429", s(429), false),
            ("409", s(409), false),
        ];
        for (what, failure, want) in cases {
            assert_eq!(failure.may_have_applied(), want, "{what}");
        }
    }

    #[test]
    fn json_patches_are_resent_only_when_a_resource_version_test_guards_them() {
        let guarded = br#"[{"op":"test","path":"/metadata/resourceVersion","value":"7"},{"op":"add","path":"/spec/items/-","value":1}]"#;
        let cases: [(&str, bool, &[u8], bool); 6] = [
            ("not a JSON patch (GET, a create, a merge patch)", false, b"{}", true),
            ("a plain JSON patch", true, br#"[{"op":"add","path":"/spec/items/-","value":1}]"#, false),
            ("a guarded JSON patch", true, guarded, true),
            ("a test of another path", true, br#"[{"op":"test","path":"/spec","value":"7"}]"#, false),
            ("not JSON", true, b"[", false),
            ("empty", true, b"[]", false),
        ];
        for (what, json_patch, body, want) in cases {
            assert_eq!(resendable(json_patch, body), want, "{what}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn kubes_typed_requests_get_the_same_retries() {
        let api = |code: u16| kube::Error::Api(kube::core::Status::failure("x", "y").with_code(code).boxed());
        let cases: [(&str, Vec<kube::Error>, usize, u64, bool); 4] = [
            ("503 twice, then an answer", vec![api(503), api(503)], 3, 2, true),
            ("no answer once", vec![kube::Error::Service("reset".into())], 2, 1, true),
            ("404 is final", vec![api(404)], 1, 0, false),
            ("unreadable is final", vec![kube::Error::LinesCodecMaxLineLengthExceeded], 1, 0, false),
        ];
        for (what, failures, calls, waited, ok) in cases {
            let failures = std::sync::Mutex::new(failures.into_iter());
            let sent = std::sync::atomic::AtomicUsize::new(0);
            let started = tokio::time::Instant::now();
            let got = kube(8, || {
                sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let next = failures.lock().unwrap().next();
                async move { next.map_or(Ok(()), Err) }
            })
            .await;
            assert_eq!(got.is_ok(), ok, "{what}");
            assert_eq!(sent.into_inner(), calls, "{what}");
            assert_eq!(started.elapsed().as_secs(), waited, "{what}");
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        let cases =
            [("3", Some(3)), (" 10 ", Some(10)), ("0", Some(0)), ("-1", None), ("1.5", None), ("Wed, 21 Oct 2015 07:28:00 GMT", None)];
        for (v, want) in cases {
            assert_eq!(retry_after(&HeaderValue::from_static(v)), want.map(Duration::from_secs), "{v}");
        }
    }
}
