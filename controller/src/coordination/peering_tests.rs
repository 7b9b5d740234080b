//! Peering under a stalled API path, on a paused clock: a controller that cannot write its
//! own keepalive must stop handling before its record dies (when a peer of lower priority
//! resumes), and resume once it writes again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use http::Method;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::peering::{Family, Keepalive, Pauses, Peering, fence_after};
use super::{Authority, Ownership};
use crate::clock::Clock;
use crate::cluster::{Api, Error};
use crate::logs::Logger;

/// One peering object; merge patches apply to it. When stalled, requests neither fail nor answer.
struct FakePeering {
    object: Mutex<Value>,
    stalled: AtomicBool,
}

impl Api for FakePeering {
    fn request<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        _: Option<&'a str>,
        body: Option<Vec<u8>>,
    ) -> BoxFuture<'a, Result<Value, Error>> {
        Box::pin(async move {
            if self.stalled.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            let mut object = self.object.lock();
            match method {
                Method::GET => Ok(object.clone()),
                Method::PATCH => {
                    let patch: Value = serde_json::from_slice(&body.unwrap_or_default()).unwrap();
                    json_patch::merge(&mut object, &patch);
                    Ok(object.clone())
                }
                _ => Err(Error::Api { method, path: path.into(), code: 405, reason: String::new(), message: String::new() }),
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_controller_that_cannot_write_its_keepalive_pauses_before_its_record_dies_and_resumes_after() {
    let api = Arc::new(FakePeering { object: Mutex::new(json!({"status": {}})), stalled: AtomicBool::new(false) });
    let authority = Authority::new(Ownership::All);
    let lifetime = Duration::from_secs(20);
    let peering = Peering {
        family: Family::Bosun,
        name: "default".into(),
        namespace: None,
        identity: "me".into(),
        priority: 100,
        lifetime,
        mandatory: true,
    };
    let k = Keepalive::start(peering, api.clone(), Pauses::new(authority.clone()), Logger::new(None), Clock::tokio())
        .await
        .expect("started")
        .expect("peering");
    let (_stop, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(k.run(futures::stream::pending(), rx));
    assert!(authority.owns("obj"), "alone: runs");
    let turn = authority.begin("obj").expect("ours");
    let written = tokio::time::Instant::now();
    api.stalled.store(true, Ordering::SeqCst);
    // A peer of lower priority resumes `lifetime` after our last write: we must be paused by
    // then, and what ran told to end.
    tokio::time::timeout(lifetime, turn.revoked()).await.expect("fenced before the record died");
    let took = written.elapsed();
    assert!(took <= fence_after(lifetime), "fenced {took:?} after the last keepalive");
    assert!(!authority.owns("obj"));
    drop(turn);
    tokio::time::sleep(lifetime * 2).await;
    assert!(!authority.owns("obj"), "stays paused while the keepalive cannot be written");
    api.stalled.store(false, Ordering::SeqCst);
    let resumed = tokio::time::Instant::now();
    while !authority.owns("obj") {
        assert!(resumed.elapsed() < lifetime, "not resumed {:?} after the API came back", resumed.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task.abort();
}
