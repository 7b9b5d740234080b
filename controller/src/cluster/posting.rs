//! Posting events about objects, as Kopf's posting engine does: the events handlers ask for
//! (when posting is enabled) and, with `loggers` on, the lines of each object's handling cycle
//! at or above a level (the controller's own, failures among them, and the handlers' log
//! lines), in the background so that no cycle waits for them. Kopf 1.44+ posts no lines by
//! default, nor an event of its own for a failure; so does Bosun. As in Kopf, the lines of
//! spies, index handlers, timers, daemons and admission reviews are not posted (Kopf logs them
//! through its local loggers): a timer every few seconds would flood the object's events.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bosun_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use crate::cluster::Api;
use crate::cluster::events::{self, Regarding};
use crate::logs::{Level, Line, Logger, ObjectRef};

/// How events are posted (Kopf's `settings.posting`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting {
    /// Post events at all, handlers' own included (Kopf's `posting.enabled`).
    pub enabled: bool,
    /// Post the lines of objects' handling cycles too (Kopf's `posting.loggers`).
    pub loggers: bool,
    /// The least level of the lines posted (Kopf's `posting.level`).
    pub level: Level,
}

impl Default for Posting {
    /// Kopf 1.45's: enabled, lines not posted, INFO.
    fn default() -> Self {
        Posting { enabled: true, loggers: false, level: Level::Info }
    }
}

impl Posting {
    /// Whether a handling cycle's line of `level` is posted.
    pub fn posts_line(&self, level: Level) -> bool {
        self.enabled && self.loggers && level >= self.level
    }
}

/// The event Kopf posts for a log line: its level as the type (`Debug`, `Normal`, `Warning`,
/// `Error`), the reason `Logging`, the line without the object's prefix as the message.
pub fn line_event(line: &Line) -> pb::Event {
    let kind = match line.level {
        Level::Debug => "Debug",
        Level::Info => "Normal",
        Level::Warn => "Warning",
        Level::Error => "Error",
    };
    pb::Event { r#type: kind.into(), reason: "Logging".into(), message: line.text.clone(), regarding: None }
}

/// An event waiting to be posted.
struct Queued {
    regarding: Regarding,
    event: pb::Event,
}

/// How many events may wait to be posted. Past it (an API server that stopped answering, a
/// handler that posts in a loop) new events are dropped and counted, so that memory stays
/// bounded; the poster says so once each time it starts dropping.
pub const QUEUE: usize = 10_000;

/// Posts events in the background, in the order they were queued.
#[derive(Clone)]
pub struct Poster {
    queue: mpsc::Sender<Queued>,
    dropped: Arc<AtomicUsize>,
    dropping: Arc<AtomicBool>,
    log: Logger,
}

impl Poster {
    /// A poster whose task runs on `tasks` until every clone of it is gone.
    pub fn start(api: Arc<dyn Api>, log: Logger, tasks: &TaskTracker) -> Poster {
        Poster::with_queue(api, log, tasks, QUEUE)
    }

    /// [`Poster::start`] with room for `queue` events.
    fn with_queue(api: Arc<dyn Api>, log: Logger, tasks: &TaskTracker, queue: usize) -> Poster {
        let (sender, mut queued) = mpsc::channel::<Queued>(queue.max(1));
        let task_log = log.clone();
        tasks.spawn(async move {
            while let Some(Queued { regarding, event }) = queued.recv().await {
                if let Err(e) = events::post(&*api, &regarding, &event.r#type, &event.reason, &event.message).await {
                    let obj = ObjectRef { namespace: regarding.namespace.clone(), name: regarding.name.clone() };
                    task_log.warn(Some(&obj), &format!("Failed to post an event: {e}"));
                }
            }
        });
        Poster { queue: sender, dropped: Arc::default(), dropping: Arc::default(), log }
    }

    /// Queues `event` about `regarding`; drops it when [`QUEUE`] events wait already.
    pub fn post(&self, regarding: Regarding, event: pb::Event) {
        match self.queue.try_send(Queued { regarding, event }) {
            Ok(()) => self.dropping.store(false, Ordering::Relaxed),
            Err(mpsc::error::TrySendError::Full(q)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                if !self.dropping.swap(true, Ordering::Relaxed) {
                    let obj = ObjectRef { namespace: q.regarding.namespace.clone(), name: q.regarding.name.clone() };
                    let line =
                        format!("Events are not posted as fast as they come: {QUEUE} wait already; dropping new ones until they drain.");
                    self.log.warn(Some(&obj), &line);
                }
            }
            // The task ends only when the poster does: nothing is lost but at a stop.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// How many events were dropped so far because too many waited.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An API server that takes requests and never answers.
    #[derive(Default)]
    struct Stalled {
        calls: AtomicUsize,
    }

    impl Api for Stalled {
        fn request<'a>(
            &'a self,
            _: http::Method,
            _: &'a str,
            _: Option<&'a str>,
            _: Option<Vec<u8>>,
        ) -> futures::future::BoxFuture<'a, Result<serde_json::Value, crate::cluster::Error>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_past_the_queue_are_dropped_and_counted_when_the_api_server_stalls() {
        let api = Arc::new(Stalled::default());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let poster = Poster::with_queue(api.clone(), Logger::new(Some(crate::LogSink(tx))), &TaskTracker::new(), 3);
        let regarding = || Regarding {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "obj".into(),
            uid: "u".into(),
        };
        let event = || pb::Event { r#type: "Normal".into(), reason: "R".into(), message: "m".into(), regarding: None };
        poster.post(regarding(), event());
        while api.calls.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        // One is being posted (and stalls); three wait; two more are dropped.
        for _ in 0..5 {
            poster.post(regarding(), event());
        }
        assert_eq!(poster.dropped(), 2);
        let mut said = Vec::new();
        while let Ok(line) = rx.try_recv() {
            said.push(line);
        }
        assert_eq!(said.iter().filter(|l| l.contains("dropping new ones until they drain")).count(), 1, "said once: {said:?}");
    }

    #[test]
    fn lines_are_posted_at_or_above_the_level_only_with_loggers_on_and_posting_enabled() {
        let on = |level| Posting { enabled: true, loggers: true, level };
        // (posting, line level) → posted
        let cases = [
            (Posting::default(), Level::Error, false),
            (on(Level::Info), Level::Debug, false),
            (on(Level::Info), Level::Info, true),
            (on(Level::Info), Level::Error, true),
            (on(Level::Warn), Level::Info, false),
            (on(Level::Warn), Level::Warn, true),
            (on(Level::Debug), Level::Debug, true),
            (Posting { enabled: false, ..on(Level::Debug) }, Level::Error, false),
        ];
        for (posting, level, want) in cases {
            assert_eq!(posting.posts_line(level), want, "{posting:?} {level:?}");
        }
    }

    #[test]
    fn a_lines_event_has_its_level_as_type_and_the_reason_logging_as_kopf_posts_them() {
        let cases = [(Level::Debug, "Debug"), (Level::Info, "Normal"), (Level::Warn, "Warning"), (Level::Error, "Error")];
        for (level, kind) in cases {
            let e = line_event(&Line::new(level, "Handler 'x' failed permanently: no"));
            assert_eq!((e.r#type.as_str(), e.reason.as_str(), e.message.as_str()), (kind, "Logging", "Handler 'x' failed permanently: no"));
        }
    }
}
