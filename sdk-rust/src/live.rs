//! A daemon's stream to the controller ([`DaemonStream`]) and [`Live`], its sending side: what
//! a daemon's [`Cause`](crate::Cause) logs, posts or patches goes there at once. The daemon's
//! task (`daemon.rs`) sends its exit on the same stream.

use std::pin::Pin;

use bosun_proto::v1 as pb;
use futures::Stream;
use tokio::sync::mpsc;
use tonic::Status;

use crate::outputs::{EventRecord, LogRecord};

/// The stream of a running daemon's messages.
pub type DaemonStream = Pin<Box<dyn Stream<Item = Result<pb::DaemonMessage, Status>> + Send>>;

/// Where a daemon's records go at once.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    tx: mpsc::UnboundedSender<Result<pb::DaemonMessage, Status>>,
}

impl Live {
    /// Records sent to the receiving end of `tx`.
    pub(crate) fn new(tx: mpsc::UnboundedSender<Result<pb::DaemonMessage, Status>>) -> Self {
        Live { tx }
    }

    fn send(&self, message: pb::daemon_message::Message) {
        // The controller may have gone away: then nobody is listening, and that is fine.
        let _ = self.tx.send(Ok(pb::DaemonMessage { message: Some(message) }));
    }

    pub(crate) fn log(&self, record: LogRecord) {
        self.send(pb::daemon_message::Message::Log(record.into_proto()));
    }

    pub(crate) fn event(&self, record: EventRecord) {
        self.send(pb::daemon_message::Message::Event(record.into_proto()));
    }

    /// Sends a patch, encoded as `Patch::encode` does it: the merge patch, then the JSON-patch
    /// operations, each only when not empty.
    pub(crate) fn patch(&self, merge_patch: Vec<u8>, json_patch: Vec<u8>) {
        if !merge_patch.is_empty() {
            self.send(pb::daemon_message::Message::MergePatch(merge_patch));
        }
        if !json_patch.is_empty() {
            self.send(pb::daemon_message::Message::JsonPatch(json_patch));
        }
    }
}
