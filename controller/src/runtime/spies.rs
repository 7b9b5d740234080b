//! Raw-event spies (Kopf's `on.event`): every watch event, including the initial listing,
//! goes to the matching EVENT handlers with its type. A relist after the watch was down
//! (`cluster::watching`) delivers only what changed meanwhile (objects whose
//! resourceVersion moved, and deletions), so spies see it as the events they missed, not as
//! every object anew. Nothing is stored on the object,
//! failures are logged and ignored, and spies run in queues of their own (serial per
//! object, in event order) so they never hold up the changing handlers of the same object.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use super::context::{ResourceContext, object_ref, to_json};
use crate::cluster::watching::Seen;

/// How long an idle spy queue stays around.
const IDLE: Duration = Duration::from_secs(30);

type Item = (&'static str, Value);

/// The spy queues of one resource.
#[derive(Clone)]
pub struct Spies {
    ctx: Arc<ResourceContext>,
    queues: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Item>>>>,
    known: Arc<Mutex<HashSet<String>>>,
    tasks: TaskTracker,
    stop: tokio::sync::watch::Receiver<bool>,
}

/// The watch event type Kopf reports: none for the listing, ADDED for an object not seen
/// before, MODIFIED after, DELETED.
pub fn event_type(seen: &Seen, known: &mut HashSet<String>) -> &'static str {
    let uid = seen.body().pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
    match seen {
        Seen::Listed(_) => {
            known.insert(uid);
            ""
        }
        Seen::Upsert(_) => {
            if known.insert(uid) {
                "ADDED"
            } else {
                "MODIFIED"
            }
        }
        Seen::Deleted(_) => {
            known.remove(&uid);
            "DELETED"
        }
    }
}

impl Spies {
    /// Spy queues for a resource.
    pub fn new(ctx: Arc<ResourceContext>, tasks: TaskTracker, stop: tokio::sync::watch::Receiver<bool>) -> Spies {
        Spies { ctx, queues: Arc::default(), known: Arc::default(), tasks, stop }
    }

    /// Queues a watch event for the spies that match the object.
    pub fn observe(&self, seen: &Seen) {
        if self.ctx.spies.is_empty() {
            return;
        }
        let etype = event_type(seen, &mut self.known.lock());
        let body = seen.body();
        if !self.ctx.spies.iter().any(|h| h.matches_object(body)) {
            return;
        }
        let m = &body["metadata"];
        let key = format!("{}/{}", m["namespace"].as_str().unwrap_or(""), m["name"].as_str().unwrap_or(""));
        let mut queues = self.queues.lock();
        let item = match queues.get(&key) {
            Some(tx) => match tx.send((etype, body.clone())) {
                Ok(()) => return,
                Err(mpsc::error::SendError(item)) => item,
            },
            None => (etype, body.clone()),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(item).expect("the receiver is alive");
        queues.insert(key.clone(), tx);
        let me = self.clone();
        self.tasks.spawn(async move { me.work(key, rx).await });
    }

    async fn work(self, key: String, mut rx: mpsc::UnboundedReceiver<Item>) {
        let mut stop = self.stop.clone();
        loop {
            let item = tokio::select! {
                _ = stop.changed() => return,
                m = rx.recv() => m,
                _ = tokio::time::sleep(IDLE) => {
                    let mut queues = self.queues.lock();
                    if rx.is_empty() {
                        queues.remove(&key);
                        return;
                    }
                    continue;
                }
            };
            let Some((etype, body)) = item else { return };
            for h in self.ctx.spies.iter().filter(|h| h.matches_object(&body)) {
                self.call(h, etype, &body).await;
            }
        }
    }

    async fn call(&self, h: &crate::state::registry::Handler, etype: &str, body: &Value) {
        let obj = object_ref(body);
        let req = pb::HandleRequest {
            handler_id: h.id.clone(),
            reason: pb::Reason::Event as i32,
            resource: Some(self.ctx.pb_resource()),
            object: to_json(body),
            event_type: etype.to_string(),
            ..Default::default()
        };
        let log = &self.ctx.log;
        match self.ctx.servers[h.server].handle(req, h.call_timeout).await {
            Err(failure) => {
                log.warn(Some(&obj), &format!("Handler '{}' {failure}; the event is skipped.", h.id));
            }
            Ok(answer) => {
                self.ctx.log_lines(&obj, &answer.logs);
                match pb::Outcome::try_from(answer.outcome).unwrap_or(pb::Outcome::UnexpectedError) {
                    pb::Outcome::Success => log.info(Some(&obj), &format!("Handler '{}' succeeded.", h.id)),
                    pb::Outcome::Skipped => {}
                    _ => log.warn(Some(&obj), &format!("Handler '{}' failed: {}; ignored.", h.id, answer.message)),
                }
                self.ctx.post_events(body, answer.events.iter()).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_types_follow_kopf() {
        let body = json!({"metadata": {"uid": "u1"}});
        let mut known = HashSet::new();
        let seq = [
            (Seen::Listed(body.clone()), ""),
            (Seen::Upsert(body.clone()), "MODIFIED"),
            (Seen::Deleted(body.clone()), "DELETED"),
            (Seen::Upsert(body.clone()), "ADDED"),
            (Seen::Upsert(body.clone()), "MODIFIED"),
        ];
        for (seen, want) in seq {
            assert_eq!(event_type(&seen, &mut known), want, "{seen:?}");
        }
    }
}
