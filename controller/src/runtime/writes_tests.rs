//! Which writes' answers are read: a write whose answer a later write replaces is sent
//! unread (the real client then skips decoding the whole object), and the body returned is
//! always the last write's.

use futures::future::BoxFuture;
use http::Method;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::*;
use crate::cluster::Error;

/// Answers every write with an object at the next resourceVersion and notes each request:
/// its path and whether its answer was asked for.
#[derive(Default)]
struct Recording {
    seen: Mutex<Vec<(String, bool)>>,
}

impl Recording {
    fn answer(&self, path: &str, read: bool) -> Value {
        let mut seen = self.seen.lock();
        seen.push((path.to_string(), read));
        json!({"metadata": {"name": "x", "resourceVersion": (seen.len() + 1).to_string(), "finalizers": []}})
    }
}

impl Api for Recording {
    fn request<'a>(&'a self, _: Method, path: &'a str, _: Option<&'a str>, _: Option<Vec<u8>>) -> BoxFuture<'a, Result<Value, Error>> {
        Box::pin(async move { Ok(self.answer(path, true)) })
    }

    fn request_unread<'a>(&'a self, _: Method, path: &'a str, _: Option<&'a str>, _: Option<Vec<u8>>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.answer(path, false);
            Ok(())
        })
    }
}

#[tokio::test]
async fn only_the_answers_used_are_read() {
    let status = json!({"status": {"create_fn": {"message": "hello"}}});
    let main = json!({"metadata": {"annotations": {"a": "b"}}});
    let json_patch = vec![("h".to_string(), json!([{"op": "add", "path": "/spec/x", "value": 1}]))];
    type Case = (&'static str, Value, Value, Option<bool>, Vec<(String, Value)>, Vec<(&'static str, bool)>);
    let cases: Vec<Case> = vec![
        ("status alone: its answer is the body", status.clone(), json!({}), None, vec![], vec![("p/status", true)]),
        ("status then main: the status answer unread", status.clone(), main.clone(), None, vec![], vec![("p/status", false), ("p", true)]),
        (
            "status then a JSON patch: the status answer read (the patch's resend is guarded by its resourceVersion)",
            status.clone(),
            json!({}),
            None,
            json_patch.clone(),
            vec![("p/status", true), ("p", true)],
        ),
        (
            "status then the finalizer: made against the status answer",
            status.clone(),
            json!({}),
            Some(true),
            vec![],
            vec![("p/status", true), ("p", true)],
        ),
        ("main alone", json!({}), main.clone(), None, vec![], vec![("p", true)]),
    ];
    for (name, status, main, finalizer, json_patches, want) in cases {
        let api = Recording::default();
        let w = Writes { main, status, finalizer, json_patches, events: vec![] };
        let body = json!({"metadata": {"name": "x", "resourceVersion": "1"}});
        let written = write(&api, "p", "f", &body, &w).await.unwrap().expect("something was written");
        let seen = api.seen.lock().clone();
        let want: Vec<(String, bool)> = want.into_iter().map(|(p, r)| (p.to_string(), r)).collect();
        assert_eq!(seen, want, "{name}");
        // The body returned is the last write's answer.
        assert_eq!(object::version(&written), Some((seen.len() + 1).to_string().as_str()), "{name}");
    }
}
