//! Handle calls on one long-lived `HandleStream` per handler server, for servers that ask for
//! it (`DescribeResponse.handle_stream`): a Python grpcio server spends ~0.3 ms of CPU on each
//! unary call and ~0.1 ms on a stream message, and a message carries as many calls as are
//! waiting when it is sent. What a call means is the unary call's: its answer or gRPC status,
//! its deadline (kept here: when it passes the server is told to `cancel` the call, and a late
//! answer is dropped), a stream that breaks while the call is out (lost: it may have run), a
//! stream that cannot be opened (sorted as a unary call's failure: unreachable when no
//! connection was made).
//!
//! The stream is opened by the first call that needs it and replaced by the next call after it
//! ended; the state of the open stream (calls out, by id) lives in [`Open`], its transitions
//! are its methods, and the two tasks (the reader, and tonic's writer pulling the outbound
//! queue) only move messages.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bosun_proto::v1 as pb;
use futures::StreamExt;
use pb::handler_server_client::HandlerServerClient;
use tokio::sync::{mpsc, oneshot};
use tonic::transport::Channel;

use super::failures::{CallFailure, classify};

/// The most calls one `HandleCalls` message carries.
const MAX_BATCH: usize = 256;

/// The longest a call waits for others to share its message (see [`batches`]).
const LINGER: Duration = Duration::from_millis(2);

type Reply = oneshot::Sender<Result<pb::HandleResponse, CallFailure>>;

/// One open stream: the calls out, waiting for their answers.
struct Open {
    outbound: mpsc::UnboundedSender<pb::HandleCall>,
    /// Told each time answers come in.
    answered: tokio::sync::Notify,
    /// `None` once the stream ended: later calls need a new stream.
    waiting: parking_lot::Mutex<Option<HashMap<u64, Reply>>>,
}

impl Open {
    /// Sends call `id`; `None` when the stream has ended meanwhile.
    fn send(
        &self,
        id: u64,
        request: pb::HandleRequest,
        traceparent: String,
    ) -> Option<oneshot::Receiver<Result<pb::HandleResponse, CallFailure>>> {
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().as_mut()?.insert(id, tx);
        let call = pb::HandleCall { id, request: Some(request), cancel: false, traceparent };
        if self.outbound.send(call).is_err() {
            self.waiting.lock().as_mut().map(|w| w.remove(&id));
            return None;
        }
        Some(rx)
    }

    /// Stops waiting for call `id` and tells the server to cancel it (when it is still out).
    fn cancel(&self, id: u64) {
        let out = self.waiting.lock().as_mut().and_then(|w| w.remove(&id));
        if out.is_some() {
            let _ = self.outbound.send(pb::HandleCall { id, request: None, cancel: true, traceparent: String::new() });
        }
    }

    /// How many calls are out.
    fn out(&self) -> usize {
        self.waiting.lock().as_ref().map_or(0, HashMap::len)
    }

    /// An answer came: to its call, when it still waits (a late or unknown one is dropped).
    fn answered(&self, answer: pb::HandleAnswer) {
        let Some(reply) = self.waiting.lock().as_mut().and_then(|w| w.remove(&answer.id)) else { return };
        let result = match answer.answer {
            Some(pb::handle_answer::Answer::Response(r)) => Ok(r),
            Some(pb::handle_answer::Answer::Error(e)) => {
                Err(classify(&tonic::Status::new(tonic::Code::from_i32(e.code), e.message), Duration::ZERO))
            }
            None => {
                Err(CallFailure::Failed { code: tonic::Code::Internal, message: "the server's answer on HandleStream is empty".into() })
            }
        };
        let _ = reply.send(result);
    }

    /// The stream ended: every call still out is lost (it may have run).
    fn ended(&self, why: &str) {
        let waiting = self.waiting.lock().take().unwrap_or_default();
        for (_, reply) in waiting {
            let _ = reply.send(Err(CallFailure::Lost(why.to_string())));
        }
    }

    fn is_open(&self) -> bool {
        self.waiting.lock().is_some()
    }
}

/// Removes a call that is dropped (its cycle was cancelled) or times out from its stream.
struct Pending<'a> {
    open: &'a Open,
    id: u64,
    done: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.open.cancel(self.id);
        }
    }
}

/// The `HandleStream` of one handler server.
#[derive(Debug)]
pub struct HandleStream {
    channel: Channel,
    /// How long opening the stream (connecting, and the server's headers) may take.
    open_within: Duration,
    open: tokio::sync::Mutex<Option<Arc<Open>>>,
    ids: AtomicU64,
}

impl std::fmt::Debug for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Open").field("open", &self.is_open()).finish()
    }
}

impl HandleStream {
    /// Calls go over `channel`, on a stream opened (within `open_within`) when the first one
    /// is made.
    pub fn new(channel: Channel, open_within: Duration) -> HandleStream {
        HandleStream { channel, open_within, open: tokio::sync::Mutex::new(None), ids: AtomicU64::new(1) }
    }

    /// Runs one handler attempt on the stream with `deadline` (from when it is sent).
    pub async fn call(
        &self,
        request: pb::HandleRequest,
        deadline: Duration,
        traceparent: String,
    ) -> Result<pb::HandleResponse, CallFailure> {
        let open = self.stream().await?;
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let Some(answer) = open.send(id, request, traceparent) else {
            return Err(CallFailure::Unreachable("the handler stream ended before the call was sent".into()));
        };
        let mut pending = Pending { open: &open, id, done: false };
        let result = match tokio::time::timeout(deadline, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(CallFailure::Lost("the handler stream ended".into())),
            Err(_) => return Err(CallFailure::TimedOut(deadline)), // `pending` cancels the call
        };
        pending.done = true;
        result
    }

    /// The open stream, or a new one.
    async fn stream(&self) -> Result<Arc<Open>, CallFailure> {
        let mut slot = self.open.lock().await;
        if let Some(open) = slot.as_ref().filter(|o| o.is_open()) {
            return Ok(open.clone());
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let open =
            Arc::new(Open { outbound: tx, answered: tokio::sync::Notify::new(), waiting: parking_lot::Mutex::new(Some(HashMap::new())) });
        let outbound = batches(rx, open.clone());
        let mut client = HandlerServerClient::new(self.channel.clone())
            .max_decoding_message_size(64 * 1024 * 1024)
            .max_encoding_message_size(64 * 1024 * 1024);
        // The server sends its headers at once; a server that does not within the bound is
        // unreachable as far as these calls go.
        let opened = tokio::time::timeout(self.open_within, client.handle_stream(outbound)).await;
        let mut answers = match opened {
            Err(_) => return Err(CallFailure::Unreachable("the handler stream was not opened in time".into())),
            Ok(Err(status)) => return Err(classify(&status, Duration::ZERO)),
            Ok(Ok(response)) => response.into_inner(),
        };
        let reader = open.clone();
        tokio::spawn(async move {
            let why = loop {
                match answers.next().await {
                    Some(Ok(batch)) => {
                        batch.answers.into_iter().for_each(|a| reader.answered(a));
                        reader.answered.notify_waiters();
                    }
                    Some(Err(status)) => break classify(&status, Duration::ZERO).to_string(),
                    None => break "the server ended the handler stream".to_string(),
                }
            };
            reader.ended(&why);
        });
        *slot = Some(open.clone());
        Ok(open)
    }
}

/// The outbound messages: the calls waiting when one is sent, as Nagle's algorithm does for
/// TCP. With no other call out, a call goes at once; while the server works on others, the
/// calls that come meanwhile wait for its next answers (or [`LINGER`], or [`MAX_BATCH`] of
/// them) and go together: a busy server reads one message, not one per call, and a call sent
/// earlier would only have waited in its queue.
fn batches(rx: mpsc::UnboundedReceiver<pb::HandleCall>, open: Arc<Open>) -> impl futures::Stream<Item = pb::HandleCalls> {
    futures::stream::unfold((rx, open), |(mut rx, open)| async move {
        let first = rx.recv().await?;
        let mut calls = vec![first];
        let drain = |rx: &mut mpsc::UnboundedReceiver<pb::HandleCall>, calls: &mut Vec<pb::HandleCall>| {
            while calls.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(call) => calls.push(call),
                    Err(_) => break,
                }
            }
        };
        drain(&mut rx, &mut calls);
        {
            // Registered before looking, so that no answer in between is missed.
            let answered = open.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            // Calls out besides these (a cancellation is not out): the server is busy.
            let busy = open.out() > calls.iter().filter(|c| !c.cancel).count();
            if busy && calls.len() < MAX_BATCH {
                let _ = tokio::time::timeout(LINGER, answered).await;
                drain(&mut rx, &mut calls);
            }
        }
        Some((pb::HandleCalls { calls }, (rx, open)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> (Open, mpsc::UnboundedReceiver<pb::HandleCall>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Open { outbound: tx, answered: tokio::sync::Notify::new(), waiting: parking_lot::Mutex::new(Some(HashMap::new())) }, rx)
    }

    fn answer(id: u64, answer: Option<pb::handle_answer::Answer>) -> pb::HandleAnswer {
        pb::HandleAnswer { id, answer }
    }

    #[tokio::test]
    async fn each_answer_reaches_its_call_and_an_error_reads_as_the_unary_status() {
        let (open, mut sent) = open();
        let a = open.send(1, pb::HandleRequest::default(), "tp".into()).unwrap();
        let b = open.send(2, pb::HandleRequest::default(), String::new()).unwrap();
        let c = open.send(3, pb::HandleRequest::default(), String::new()).unwrap();
        assert_eq!(sent.recv().await.unwrap().traceparent, "tp");
        let ok = pb::HandleResponse { result: b"{}".to_vec(), ..Default::default() };
        open.answered(answer(2, Some(pb::handle_answer::Answer::Response(ok.clone()))));
        open.answered(answer(1, Some(pb::handle_answer::Answer::Error(pb::CallError { code: 5, message: "no such handler".into() }))));
        open.answered(answer(3, Some(pb::handle_answer::Answer::Error(pb::CallError { code: 14, message: "not described".into() }))));
        open.answered(answer(99, None)); // unknown: dropped
        assert_eq!(b.await.unwrap(), Ok(ok));
        assert_eq!(a.await.unwrap(), Err(CallFailure::Failed { code: tonic::Code::NotFound, message: "no such handler".into() }));
        assert_eq!(c.await.unwrap(), Err(CallFailure::Unreachable("not described".into())));
    }

    #[tokio::test]
    async fn a_cancelled_call_is_told_to_the_server_once_and_its_late_answer_is_dropped() {
        let (open, mut sent) = open();
        let a = open.send(7, pb::HandleRequest::default(), String::new()).unwrap();
        open.cancel(7);
        open.cancel(7);
        open.answered(answer(7, Some(pb::handle_answer::Answer::Response(Default::default()))));
        assert!(a.await.is_err(), "the reply was dropped with the cancellation");
        let first = sent.recv().await.unwrap();
        let second = sent.recv().await.unwrap();
        assert!(!first.cancel && second.cancel && second.id == 7 && second.request.is_none());
        assert!(sent.try_recv().is_err(), "one cancellation");
    }

    #[tokio::test]
    async fn when_the_stream_ends_every_call_out_is_lost_and_no_new_call_is_taken() {
        let (open, _sent) = open();
        let a = open.send(1, pb::HandleRequest::default(), String::new()).unwrap();
        open.ended("reset");
        assert_eq!(a.await.unwrap(), Err(CallFailure::Lost("reset".into())));
        assert!(open.send(2, pb::HandleRequest::default(), String::new()).is_none());
        assert!(!open.is_open());
    }
}
