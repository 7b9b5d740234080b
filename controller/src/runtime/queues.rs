//! Serial per-object queues for the handlers that record nothing on the object (spies and
//! index handlers): each object's items are worked in order, different objects in parallel,
//! and a queue with nothing to do goes away.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

/// How long an idle queue stays around.
const IDLE: Duration = Duration::from_secs(30);

/// What a queue does with each of its items.
pub type Work<T> = Arc<dyn Fn(T) -> BoxFuture<'static, ()> + Send + Sync>;

/// The queues of one resource, by object key.
pub struct Queues<T> {
    queues: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<T>>>>,
    work: Work<T>,
    tasks: TaskTracker,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl<T> Clone for Queues<T> {
    fn clone(&self) -> Self {
        Queues { queues: self.queues.clone(), work: self.work.clone(), tasks: self.tasks.clone(), stop: self.stop.clone() }
    }
}

impl<T: Send + 'static> Queues<T> {
    /// Queues whose items are handed to `work`, one at a time per object.
    pub fn new(work: Work<T>, tasks: TaskTracker, stop: tokio::sync::watch::Receiver<bool>) -> Queues<T> {
        Queues { queues: Arc::default(), work, tasks, stop }
    }

    /// Queues `item` behind the object's earlier items, starting its queue if needed.
    pub fn push(&self, key: String, item: T) {
        let mut queues = self.queues.lock();
        let item = match queues.get(&key) {
            Some(tx) => match tx.send(item) {
                Ok(()) => return,
                Err(mpsc::error::SendError(item)) => item,
            },
            None => item,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(item).expect("the receiver is alive");
        queues.insert(key.clone(), tx);
        let me = self.clone();
        self.tasks.spawn(async move { me.run(key, rx).await });
    }

    async fn run(self, key: String, mut rx: mpsc::UnboundedReceiver<T>) {
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
            let Some(item) = item else { return };
            (self.work)(item).await;
        }
    }
}
