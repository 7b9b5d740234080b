//! Per-object mailboxes and the serial queues built on them.
//!
//! [`Mailboxes`] is the one place that starts an object's task when its first item comes and
//! lets the task go once it has been idle, without losing an item posted meanwhile: the
//! per-object workers of the handlers ([`super::worker::Router`], which keep only the newest
//! event) and the [`Queues`] of the handlers that record nothing on the object (spies and
//! index handlers, which keep every item in order) both use it.
//!
//! A mailbox is a lock, a [`Notify`] and what is pending: a few dozen bytes. A tokio channel per
//! object cost about 3 KiB (its first block of 32 slots), which is 3 MiB per 1,000 objects when
//! a listing starts them all at once.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::task::TaskTracker;

/// How long an object's task with nothing to do stays around (workers and queues alike).
pub const IDLE: Duration = Duration::from_secs(30);

/// What is pending for one object (`P`: the newest event, or the items in order), and the
/// wake-up of its task.
pub struct Mailbox<P> {
    pending: Mutex<P>,
    ready: Notify,
}

impl<P: Default> Mailbox<P> {
    /// Waits until something was posted since the last wait (at once if it was meanwhile).
    pub async fn posted(&self) {
        self.ready.notified().await;
    }

    /// Works on what is pending.
    pub fn with<R>(&self, f: impl FnOnce(&mut P) -> R) -> R {
        f(&mut self.pending.lock())
    }

    /// Takes what is pending, leaving nothing.
    pub fn take(&self) -> P {
        std::mem::take(&mut *self.pending.lock())
    }
}

/// The mailboxes of one resource, by object key.
pub struct Mailboxes<P> {
    boxes: Arc<Mutex<HashMap<String, Arc<Mailbox<P>>>>>,
}

impl<P> Clone for Mailboxes<P> {
    fn clone(&self) -> Self {
        Mailboxes { boxes: self.boxes.clone() }
    }
}

impl<P> Default for Mailboxes<P> {
    fn default() -> Self {
        Mailboxes { boxes: Arc::default() }
    }
}

impl<P: Default> Mailboxes<P> {
    /// Puts an item into the object's mailbox with `put`. Returns the mailbox when it is new:
    /// the caller starts the task that works it.
    pub fn post(&self, key: String, put: impl FnOnce(&mut P)) -> Option<Arc<Mailbox<P>>> {
        let mut boxes = self.boxes.lock();
        if let Some(mailbox) = boxes.get(&key) {
            put(&mut mailbox.pending.lock());
            mailbox.ready.notify_one();
            return None;
        }
        let mailbox = Arc::new(Mailbox { pending: Mutex::new(P::default()), ready: Notify::new() });
        put(&mut mailbox.pending.lock());
        mailbox.ready.notify_one();
        boxes.insert(key, mailbox.clone());
        Some(mailbox)
    }

    /// Removes the object's mailbox unless something is pending (`empty` tells): true when
    /// it is gone and its task must end, false when an item came meanwhile.
    pub fn retire(&self, key: &str, mailbox: &Mailbox<P>, empty: impl FnOnce(&P) -> bool) -> bool {
        let mut boxes = self.boxes.lock();
        if !empty(&mailbox.pending.lock()) {
            return false;
        }
        boxes.remove(key);
        true
    }

    /// How many objects have a mailbox.
    pub fn len(&self) -> usize {
        self.boxes.lock().len()
    }

    /// Whether no object has a mailbox.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a queue does with each of its items.
pub type Work<T> = Arc<dyn Fn(T) -> BoxFuture<'static, ()> + Send + Sync>;

/// Serial per-object queues of one resource: each object's items are worked in order,
/// different objects in parallel, and a queue with nothing to do goes away.
pub struct Queues<T> {
    boxes: Mailboxes<VecDeque<T>>,
    work: Work<T>,
    tasks: TaskTracker,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl<T> Clone for Queues<T> {
    fn clone(&self) -> Self {
        Queues { boxes: self.boxes.clone(), work: self.work.clone(), tasks: self.tasks.clone(), stop: self.stop.clone() }
    }
}

impl<T: Send + 'static> Queues<T> {
    /// Queues whose items are handed to `work`, one at a time per object.
    pub fn new(work: Work<T>, tasks: TaskTracker, stop: tokio::sync::watch::Receiver<bool>) -> Queues<T> {
        Queues { boxes: Mailboxes::default(), work, tasks, stop }
    }

    /// Queues `item` behind the object's earlier items, starting its queue if needed.
    pub fn push(&self, key: String, item: T) {
        if let Some(mailbox) = self.boxes.post(key.clone(), |q| q.push_back(item)) {
            let me = self.clone();
            self.tasks.spawn(async move { me.run(key, mailbox).await });
        }
    }

    async fn run(self, key: String, mailbox: Arc<Mailbox<VecDeque<T>>>) {
        let mut stop = self.stop.clone();
        loop {
            if let Some(item) = mailbox.with(VecDeque::pop_front) {
                (self.work)(item).await;
                continue;
            }
            tokio::select! {
                _ = stop.changed() => return,
                _ = mailbox.posted() => {}
                _ = tokio::time::sleep(IDLE) => {
                    if self.boxes.retire(&key, &mailbox, VecDeque::is_empty) {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn items_of_one_object_are_worked_in_order_and_an_idle_queue_goes_away() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let work: Work<(String, u32)> = Arc::new(move |(key, n)| {
            let s = s.clone();
            Box::pin(async move {
                // A slow item must not let a later one of the same object overtake it.
                tokio::time::sleep(Duration::from_millis(u64::from(10 - n))).await;
                s.lock().push(format!("{key}:{n}"));
            })
        });
        let (_stop_tx, stop) = tokio::sync::watch::channel(false);
        let tasks = TaskTracker::new();
        let queues = Queues::new(work, tasks.clone(), stop);
        for n in 1..=3 {
            queues.push("ns/a".into(), ("a".into(), n));
        }
        queues.push("ns/b".into(), ("b".into(), 9));
        assert_eq!(queues.boxes.len(), 2);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let a: Vec<String> = seen.lock().iter().filter(|s| s.starts_with('a')).cloned().collect();
        assert_eq!(a, ["a:1", "a:2", "a:3"]);
        assert_eq!(seen.lock().len(), 4);
        tokio::time::sleep(IDLE + Duration::from_secs(1)).await;
        assert!(queues.boxes.is_empty(), "idle queues stay: {}", queues.boxes.len());
        // A queue that went away starts again with the next item.
        queues.push("ns/a".into(), ("a".into(), 4));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(seen.lock().last().map(String::as_str), Some("a:4"));
        tasks.close();
    }

    #[test]
    fn a_mailbox_is_retired_only_when_nothing_is_pending() {
        let boxes: Mailboxes<Option<u32>> = Mailboxes::default();
        let first = boxes.post("k".into(), |p| *p = Some(1)).expect("a new mailbox");
        assert!(boxes.post("k".into(), |p| *p = Some(2)).is_none(), "the same object's mailbox is reused");
        assert!(!boxes.retire("k", &first, Option::is_none), "an item is pending");
        assert_eq!(first.take(), Some(2));
        assert!(boxes.retire("k", &first, Option::is_none));
        assert!(boxes.is_empty());
        assert!(boxes.post("k".into(), |p| *p = Some(3)).is_some(), "a retired object gets a new mailbox");
    }
}
