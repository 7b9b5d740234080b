//! How a call to a real handler server (the Rust SDK's, over real gRPC on loopback) fails,
//! as the controller sorts it: a server that exits during the call (its runtime dropped, as a
//! killed process's sockets close) is an attempt of the handler, a server that is not there is
//! "unreachable" (nothing ran), a handler slower than the call's deadline is a timeout,
//! whichever of tonic's deadline, the server's or the controller's own fires first.

use std::time::Duration;

use bosun_controller::handlers::dispatch::{CallFailure, HandlerClient, Server};
use bosun_controller::state::outcomes::Answer;
use bosun_proto::v1 as pb;
use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::{Value, json};

/// A handler server on its own runtime, so that it can die with everything it holds open;
/// `started` gets a message when a handler begins.
struct Doomed {
    addr: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Doomed {
    fn start(started: tokio::sync::mpsc::UnboundedSender<String>) -> Doomed {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let (hangs, slow) = (started.clone(), started);
        let op = Operator::new()
            .on_create("kopf.dev/v1/kopfexamples", move |_: Cause| {
                let _ = hangs.send("hang_fn".into());
                async move {
                    std::future::pending::<()>().await;
                    Ok::<_, HandlerError>(Value::Null)
                }
            })
            .id("hang_fn")
            .on_create("kopf.dev/v1/kopfexamples", move |_: Cause| {
                let _ = slow.send("slow_fn".into());
                async move {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Ok::<_, HandlerError>(Value::Null)
                }
            })
            .id("slow_fn");
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let _ = op.serve_with_listener(listener, std::future::pending()).await;
        });
        Doomed { addr, runtime: Some(runtime) }
    }

    /// Ends the server at once: its tasks and sockets are dropped, as when its process dies.
    fn die(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Doomed {
    fn drop(&mut self) {
        self.die();
    }
}

fn request(id: &str) -> pb::HandleRequest {
    let object = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "x", "namespace": "default", "uid": "u"}});
    pb::HandleRequest {
        handler_id: id.into(),
        reason: pb::Reason::Create as i32,
        resource: Some(pb::Resource {
            group: "kopf.dev".into(),
            version: "v1".into(),
            plural: "kopfexamples".into(),
            ..Default::default()
        }),
        object: serde_json::to_vec(&object).unwrap(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_server_that_exits_during_the_call_costs_the_handler_an_attempt_and_one_that_is_not_there_does_not() {
    let (tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let mut server = Doomed::start(tx);
    let client = Server::new(&server.addr).unwrap();
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.handle(request("hang_fn"), Duration::from_secs(60)).await }
    });
    let began = tokio::time::timeout(Duration::from_secs(20), started.recv()).await.expect("the handler begins");
    assert_eq!(began.as_deref(), Some("hang_fn"));
    server.die();
    let failure = tokio::time::timeout(Duration::from_secs(20), call).await.expect("the call ends").unwrap().unwrap_err();
    assert!(matches!(failure, CallFailure::Lost(_)), "the request was sent, the handler ran: {failure:?}");
    assert!(matches!(failure.answer(), Answer::Broken(_)), "the handler's unexpected error: {failure:?}");
    assert!(failure.to_string().starts_with("the connection to the handler server was lost during the call ("), "{failure}");

    // Nobody listens there now: nothing can have run. (The runtime drops its listener a
    // moment after the connections, which a dying process's kernel closes all at once.)
    let port = server.addr.trim_start_matches("http://").to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&port).is_ok() {
        assert!(std::time::Instant::now() < deadline, "the dead server's port still accepts connections");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let failure = client.handle(request("hang_fn"), Duration::from_secs(60)).await.unwrap_err();
    assert!(matches!(failure, CallFailure::Unreachable(_)), "{failure:?}");
    assert!(matches!(failure.answer(), Answer::Unreachable(_)));
}

#[tokio::test]
async fn a_handler_slower_than_the_calls_deadline_times_out_every_time() {
    let (tx, _started) = tokio::sync::mpsc::unbounded_channel();
    let _server = Doomed::start(tx);
    let client = Server::new(&_server.addr).unwrap();
    // tonic's own deadline, the server's and the controller's race: each run must say timeout.
    for deadline_ms in [50, 200, 500, 200, 50] {
        let deadline = Duration::from_millis(deadline_ms);
        let started = std::time::Instant::now();
        let failure = client.handle(request("slow_fn"), deadline).await.unwrap_err();
        assert_eq!(failure, CallFailure::TimedOut(deadline), "{failure}");
        assert!(matches!(failure.answer(), Answer::Broken(_)));
        assert!(started.elapsed() < Duration::from_secs(4), "cut at its deadline: {:?}", started.elapsed());
    }
}
