//! Per-object mailboxes and the serial queues built on them.
//!
//! [`Mailboxes`] is the one place that starts an object's task when its first item comes and
//! lets the task go once it has been idle, without losing an item posted meanwhile: the
//! per-object workers of the handlers ([`super::worker::Router`]) and the [`Queues`] of the
//! handlers that record nothing on the object (spies and index handlers) both use it. Each
//! keeps at most one item waiting per object: while an object's item is worked, what comes
//! for it meanwhile is folded into one ([`Coalesce`]: the newest body), as Kopf's workers take
//! the latest event of an object that was busy. So memory follows the number of objects, not
//! the number of events, however slow the handler servers are; and [`Queues`] work at most
//! [`CONCURRENCY`] objects at once, so a listing of many objects opens no more calls.
//!
//! A mailbox is a lock, a [`Notify`] and what is pending: a few dozen bytes. A tokio channel per
//! object cost about 3 KiB (its first block of 32 slots), which is 3 MiB per 1,000 objects when
//! a listing starts them all at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore};
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

/// The key of an object's queue: its uid, as Kopf's (an object deleted and created again
/// under its name is another object), or `namespace/name` when it has none.
pub fn key_of(body: &serde_json::Value) -> String {
    match crate::object::meta_str(body, "uid") {
        "" => crate::object::object_key(body),
        uid => uid.to_string(),
    }
}

/// How many objects' items one resource's queues (its spies', or its index handlers') work at
/// once.
pub const CONCURRENCY: usize = 32;

/// An item that takes in a newer item of the same object, which came while it waited.
pub trait Coalesce {
    /// Folds `newer` into `self`.
    fn absorb(&mut self, newer: Self);
}

/// What a queue does with each of its items.
pub type Work<T> = Arc<dyn Fn(T) -> BoxFuture<'static, ()> + Send + Sync>;

/// Serial per-object queues of one resource: each object's items are worked one after the
/// other, those that came while one was worked folded into one; different objects in parallel,
/// [`CONCURRENCY`] at most; a queue with nothing to do goes away.
pub struct Queues<T> {
    boxes: Mailboxes<Option<T>>,
    work: Work<T>,
    limit: Arc<Semaphore>,
    tasks: TaskTracker,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl<T> Clone for Queues<T> {
    fn clone(&self) -> Self {
        Queues {
            boxes: self.boxes.clone(),
            work: self.work.clone(),
            limit: self.limit.clone(),
            tasks: self.tasks.clone(),
            stop: self.stop.clone(),
        }
    }
}

impl<T: Coalesce + Send + 'static> Queues<T> {
    /// Queues whose items are handed to `work`, one at a time per object.
    pub fn new(work: Work<T>, tasks: TaskTracker, stop: tokio::sync::watch::Receiver<bool>) -> Queues<T> {
        Queues { boxes: Mailboxes::default(), work, limit: Arc::new(Semaphore::new(CONCURRENCY)), tasks, stop }
    }

    /// Queues `item` for the object `key` (folded into the item waiting, if one is), starting
    /// its queue if needed.
    pub fn push(&self, key: String, item: T) {
        let put = |pending: &mut Option<T>| match pending {
            Some(waiting) => waiting.absorb(item),
            None => *pending = Some(item),
        };
        if let Some(mailbox) = self.boxes.post(key.clone(), put) {
            let me = self.clone();
            self.tasks.spawn(async move { me.run(key, mailbox).await });
        }
    }

    async fn run(self, key: String, mailbox: Arc<Mailbox<Option<T>>>) {
        let mut stop = self.stop.clone();
        loop {
            if mailbox.with(|p| p.is_some()) {
                // What comes while the permit is awaited is folded into the waiting item.
                let permit = tokio::select! {
                    _ = stop.changed() => return,
                    p = self.limit.acquire() => p.expect("the semaphore is never closed"),
                };
                if let Some(item) = mailbox.take() {
                    (self.work)(item).await;
                }
                drop(permit);
                continue;
            }
            tokio::select! {
                _ = stop.changed() => return,
                _ = mailbox.posted() => {}
                _ = tokio::time::sleep(IDLE) => {
                    if self.boxes.retire(&key, &mailbox, Option::is_none) {
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
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering::SeqCst;

    /// The newest wins.
    impl Coalesce for u32 {
        fn absorb(&mut self, newer: u32) {
            *self = newer;
        }
    }

    impl Coalesce for (String, u32) {
        fn absorb(&mut self, newer: (String, u32)) {
            *self = newer;
        }
    }

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
        queues.push("ns/b".into(), ("b".into(), 9));
        for n in 1..=3 {
            queues.push("ns/a".into(), ("a".into(), n));
            assert_eq!(queues.boxes.len(), 2);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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

    type Gated = (Queues<u32>, Arc<Mutex<Vec<u32>>>, Arc<Semaphore>);

    /// Queues whose work records each item, counts the items worked at once in `now` (the
    /// most in `most`) and waits for a permit of the returned semaphore.
    fn gated(now: Arc<AtomicUsize>, most: Arc<AtomicUsize>) -> Gated {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(Semaphore::new(0));
        let (s, g) = (seen.clone(), gate.clone());
        let work: Work<u32> = Arc::new(move |n| {
            let (s, g, now, most) = (s.clone(), g.clone(), now.clone(), most.clone());
            Box::pin(async move {
                most.fetch_max(now.fetch_add(1, SeqCst) + 1, SeqCst);
                s.lock().push(n);
                g.acquire().await.unwrap().forget();
                now.fetch_sub(1, SeqCst);
            })
        });
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        std::mem::forget(stop_tx);
        (Queues::new(work, TaskTracker::new(), stop), seen, gate)
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_objects_events_wait_as_one_the_latest() {
        let (queues, seen, gate) = gated(Arc::default(), Arc::default());
        queues.push("uid-a".into(), 0);
        tokio::time::sleep(Duration::from_millis(10)).await;
        for n in 1..=1000 {
            queues.push("uid-a".into(), n);
        }
        gate.add_permits(10_000);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(*seen.lock(), [0, 1000], "the first, then only the latest of those that came meanwhile");
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_objects_are_worked_at_once_than_the_limit() {
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (queues, seen, gate) = gated(now, most.clone());
        for n in 0..200 {
            queues.push(format!("uid-{n}"), n);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(most.load(SeqCst), CONCURRENCY, "the limit, then the others wait");
        gate.add_permits(10_000);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(seen.lock().len(), 200, "all are worked in the end");
        assert_eq!(most.load(SeqCst), CONCURRENCY);
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
