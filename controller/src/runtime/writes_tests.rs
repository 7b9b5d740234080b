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
    type Case = (&'static str, Value, Value, Value, Option<bool>, Vec<(String, Value)>, Vec<(&'static str, bool)>);
    let none = || json!({});
    let cases: Vec<Case> = vec![
        ("status alone: its answer is the body", status.clone(), none(), none(), None, vec![], vec![("p/status", true)]),
        (
            "status then the rest of the main resource: the status answer unread",
            status.clone(),
            none(),
            main.clone(),
            None,
            vec![],
            vec![("p/status", false), ("p", true)],
        ),
        (
            "a JSON patch, then status: the patch goes first (its resend is guarded by the cycle's body's resourceVersion)",
            status.clone(),
            none(),
            none(),
            None,
            json_patch.clone(),
            vec![("p", true), ("p/status", true)],
        ),
        (
            "status then the finalizer: made against the status answer",
            status.clone(),
            none(),
            none(),
            Some(true),
            vec![],
            vec![("p/status", true), ("p", true)],
        ),
        (
            "a handler's patch of the main resource with the finalizer, then status, then the diffbase",
            status.clone(),
            main.clone(),
            main.clone(),
            Some(true),
            vec![],
            vec![("p", true), ("p/status", false), ("p", true)],
        ),
        (
            "a handler's patch, then status, then the finalizer's removal: made against the status answer",
            status.clone(),
            main.clone(),
            none(),
            Some(false),
            vec![],
            vec![("p", true), ("p/status", true), ("p", true)],
        ),
        ("main alone", none(), none(), main.clone(), None, vec![], vec![("p", true)]),
    ];
    for (name, status, main, last, finalizer, json_patches, want) in cases {
        let api = Recording::default();
        let w = Writes { main, last, status, finalizer, json_patches, events: vec![] };
        let body = json!({"metadata": {"name": "x", "resourceVersion": "1"}});
        let written = write(&api, "p", "f", &body, &w).await.unwrap().expect("something was written");
        let seen = api.seen.lock().clone();
        let want: Vec<(String, bool)> = want.into_iter().map(|(p, r)| (p.to_string(), r)).collect();
        assert_eq!(seen, want, "{name}");
        // The body returned is the last write's answer.
        assert_eq!(object::version(&written), Some((seen.len() + 1).to_string().as_str()), "{name}");
    }
}
