//! Posting events about objects, as Kopf's posting engine does: the events handlers ask for
//! (when posting is enabled) and, with `loggers` on, the lines of each object's handling cycle
//! at or above a level (the controller's own, failures among them, and the handlers' log
//! lines), in the background so that no cycle waits for them. Kopf 1.44+ posts no lines by
//! default, nor an event of its own for a failure; so does Bosun. As in Kopf, the lines of
//! spies, index handlers, timers, daemons and admission reviews are not posted (Kopf logs them
//! through its local loggers): a timer every few seconds would flood the object's events.

use std::sync::Arc;

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

/// Posts events in the background, in the order they were queued.
#[derive(Clone)]
pub struct Poster {
    queue: mpsc::UnboundedSender<Queued>,
}

impl Poster {
    /// A poster whose task runs on `tasks` until every clone of it is gone.
    pub fn start(api: Arc<dyn Api>, log: Logger, tasks: &TaskTracker) -> Poster {
        let (queue, mut queued) = mpsc::unbounded_channel::<Queued>();
        tasks.spawn(async move {
            while let Some(Queued { regarding, event }) = queued.recv().await {
                if let Err(e) = events::post(&*api, &regarding, &event.r#type, &event.reason, &event.message).await {
                    let obj = ObjectRef { namespace: regarding.namespace.clone(), name: regarding.name.clone() };
                    log.warn(Some(&obj), &format!("Failed to post an event: {e}"));
                }
            }
        });
        Poster { queue }
    }

    /// Queues `event` about `regarding`.
    pub fn post(&self, regarding: Regarding, event: pb::Event) {
        // The task ends only when the poster does: nothing is lost but at a stop.
        let _ = self.queue.send(Queued { regarding, event });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
