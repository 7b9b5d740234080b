//! `Server::handle` over a real tonic server (on `mem://`) that serves `HandleStream`: answers
//! reach their calls, calls that wait while others are out share a message, a deadline sends a
//! `cancel`, a stream that breaks loses the calls out and the next call opens a new one, and a
//! server that stopped serving the stream gets the call unary.

use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use futures::StreamExt;
use parking_lot::Mutex;
use pb::handler_server_server::{HandlerServer, HandlerServerServer};
use tonic::{Request, Response, Status, Streaming};

use super::dispatch::{HandlerClient, Server};
use super::failures::CallFailure;

/// What the scripted server saw.
#[derive(Default)]
struct Seen {
    /// Calls per inbound message.
    batches: Vec<usize>,
    /// Ids the controller cancelled.
    cancelled: Vec<u64>,
    /// Unary Handle calls.
    unary: usize,
    /// Streams opened.
    streams: usize,
}

/// Answers by handler id: `ok` at once, `slow` never, `missing` NOT_FOUND, `break` ends the
/// stream with an error; `hold` waits until three calls are out, then answers them all.
#[derive(Clone)]
struct Scripted {
    seen: Arc<Mutex<Seen>>,
    stream: bool,
}

type Answers = std::pin::Pin<Box<dyn futures::Stream<Item = Result<pb::HandleAnswers, Status>> + Send>>;
type Daemon = futures::stream::Empty<Result<pb::DaemonMessage, Status>>;

fn success(id: u64) -> pb::HandleAnswer {
    let response = pb::HandleResponse { result: format!("{id}").into_bytes(), ..Default::default() };
    pb::HandleAnswer { id, answer: Some(pb::handle_answer::Answer::Response(response)) }
}

#[tonic::async_trait]
impl HandlerServer for Scripted {
    async fn describe(&self, _: Request<pb::DescribeRequest>) -> Result<Response<pb::DescribeResponse>, Status> {
        Ok(Response::new(pb::DescribeResponse { handle_stream: self.stream, ..Default::default() }))
    }

    async fn handle(&self, _: Request<pb::HandleRequest>) -> Result<Response<pb::HandleResponse>, Status> {
        self.seen.lock().unary += 1;
        Ok(Response::new(pb::HandleResponse { result: b"unary".to_vec(), ..Default::default() }))
    }

    type DaemonStream = Daemon;

    async fn daemon(&self, _: Request<pb::DaemonRequest>) -> Result<Response<Daemon>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn activity(&self, _: Request<pb::ActivityRequest>) -> Result<Response<pb::ActivityResponse>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn admit(&self, _: Request<pb::AdmitRequest>) -> Result<Response<pb::AdmitResponse>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn stop_daemon(&self, _: Request<pb::StopDaemonRequest>) -> Result<Response<pb::StopDaemonResponse>, Status> {
        Err(Status::unimplemented(""))
    }

    type HandleStreamStream = Answers;

    async fn handle_stream(&self, request: Request<Streaming<pb::HandleCalls>>) -> Result<Response<Answers>, Status> {
        if !self.stream {
            return Err(Status::unimplemented("no stream here"));
        }
        self.seen.lock().streams += 1;
        let seen = self.seen.clone();
        let mut calls = request.into_inner();
        let answers = async_stream_like(move |tx| async move {
            let mut held = Vec::new();
            while let Some(Ok(message)) = calls.next().await {
                seen.lock().batches.push(message.calls.len());
                let mut out = Vec::new();
                for call in message.calls {
                    let id = call.request.as_ref().map(|r| r.handler_id.as_str()).unwrap_or_default().to_string();
                    match (call.cancel, id.as_str()) {
                        (true, _) => seen.lock().cancelled.push(call.id),
                        (false, "ok") => out.push(success(call.id)),
                        (false, "missing") => out.push(pb::HandleAnswer {
                            id: call.id,
                            answer: Some(pb::handle_answer::Answer::Error(pb::CallError { code: 5, message: "no such handler".into() })),
                        }),
                        (false, "break") => {
                            let _ = tx.send(Err(Status::internal("the server broke the stream")));
                            return;
                        }
                        (false, "hold") => {
                            held.push(call.id);
                            if held.len() == 3 {
                                out.extend(held.drain(..).map(success));
                            }
                        }
                        _ => {} // slow: never answered
                    }
                }
                if !out.is_empty() && tx.send(Ok(pb::HandleAnswers { answers: out })).is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(answers))
    }
}

/// A stream fed by a task through a channel (the task ends with the stream's consumer).
fn async_stream_like<F, Fut>(body: F) -> Answers
where
    F: FnOnce(tokio::sync::mpsc::UnboundedSender<Result<pb::HandleAnswers, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(body(tx));
    Box::pin(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
}

/// A described `Server` on `mem://name` and what its scripted server sees.
async fn served(name: &str, stream: bool) -> (Server, Arc<Mutex<Seen>>) {
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let conns = super::memory::listen(name);
    let incoming = tokio_stream::wrappers::UnboundedReceiverStream::new(conns).map(Ok::<_, std::io::Error>);
    let service = HandlerServerServer::new(Scripted { seen: seen.clone(), stream });
    tokio::spawn(tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming));
    let server = Server::new(&format!("mem://{name}")).unwrap();
    server.describe().await.unwrap();
    (server, seen)
}

fn req(handler_id: &str) -> pb::HandleRequest {
    pb::HandleRequest { handler_id: handler_id.into(), ..Default::default() }
}

const LONG: Duration = Duration::from_secs(10);

#[tokio::test]
async fn answers_and_statuses_reach_their_calls_on_one_stream() {
    let (server, seen) = served("stream-answers", true).await;
    let ok = server.handle(req("ok"), LONG).await.unwrap();
    assert_eq!(ok.result, b"1");
    let missing = server.handle(req("missing"), LONG).await;
    assert_eq!(missing, Err(CallFailure::Failed { code: tonic::Code::NotFound, message: "no such handler".into() }));
    let seen = seen.lock();
    assert_eq!((seen.streams, seen.unary), (1, 0), "one stream, no unary call");
}

#[tokio::test]
async fn calls_made_while_others_are_out_share_a_message() {
    let (server, seen) = served("stream-batches", true).await;
    let first = server.handle(req("hold"), LONG);
    let rest = async {
        // The first call is out and unanswered: the next two wait for an answer or the
        // linger and then go together.
        tokio::time::sleep(Duration::from_millis(50)).await;
        futures::join!(server.handle(req("hold"), LONG), server.handle(req("hold"), LONG))
    };
    let (a, (b, c)) = futures::join!(first, rest);
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    assert_eq!(seen.lock().batches, vec![1, 2]);
}

#[tokio::test]
async fn a_call_past_its_deadline_times_out_and_is_cancelled_on_the_server() {
    let (server, seen) = served("stream-deadline", true).await;
    let answer = server.handle(req("slow"), Duration::from_millis(100)).await;
    assert_eq!(answer, Err(CallFailure::TimedOut(Duration::from_millis(100))));
    let deadline = tokio::time::Instant::now() + LONG;
    while seen.lock().cancelled.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.lock().cancelled.len(), 1, "the server was told once");
}

#[tokio::test]
async fn a_broken_stream_loses_the_calls_out_and_the_next_call_opens_another() {
    let (server, seen) = served("stream-break", true).await;
    let (slow, broke) = futures::join!(server.handle(req("slow"), LONG), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.handle(req("break"), LONG).await
    });
    assert!(matches!(slow, Err(CallFailure::Lost(_))), "{slow:?}");
    assert!(matches!(broke, Err(CallFailure::Lost(_))), "{broke:?}");
    assert_eq!(server.handle(req("ok"), LONG).await.unwrap().result, b"3");
    assert_eq!(seen.lock().streams, 2);
}

#[tokio::test]
async fn a_server_without_the_stream_gets_its_calls_unary() {
    let (server, seen) = served("stream-none", false).await;
    assert_eq!(server.handle(req("ok"), LONG).await.unwrap().result, b"unary");
    let seen = seen.lock();
    assert_eq!((seen.streams, seen.unary), (0, 1));
}
