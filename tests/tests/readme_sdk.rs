//! The README's Rust SDK snippet, run as it is written: the build script copies it out of
//! README.md into the `readme-snippet` binary (so the README cannot show code that does not
//! compile), and this test starts that binary as a handler server and asks it over gRPC what
//! it registered.

use std::process::Stdio;
use std::time::Duration;

use bosun_controller::handlers::dispatch::Server;
use bosun_controller::logs::Logger;
use bosun_proto::v1 as pb;

const T: Duration = Duration::from_secs(30);

#[tokio::test]
async fn the_readme_handler_server_serves_a_create_and_a_filtered_field_handler_until_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let address = format!("unix://{}", dir.path().join("handlers.sock").display());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_readme-snippet"))
        .env("BOSUN_LISTEN", &address)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the README's handler server starts");
    let server = Server::new(&address).unwrap();
    if tokio::time::timeout(T, server.wait_ready(&Logger::new(None))).await.is_err() {
        let _ = child.start_kill();
        let out = child.wait_with_output().await.unwrap();
        panic!("the README's handler server did not serve on {address} within {T:?}; it said:\n{}", String::from_utf8_lossy(&out.stderr));
    }

    let described = server.describe().await.expect("Describe answers");
    let kinds: Vec<i32> = described.handlers.iter().map(|h| h.kind).collect();
    assert_eq!(kinds, [pb::HandlerKind::Create as i32, pb::HandlerKind::Field as i32], "{:?}", described.handlers);
    assert_eq!(described.handlers[0].id, "create_fn", "the result is stored at status.create_fn, as the README says");
    let field = &described.handlers[1];
    assert!(field.id.ends_with("/spec.field"), "field handler ids end with the field: {}", field.id);
    assert_eq!(field.field, "spec.field");
    let labels = &field.filters.as_ref().expect("filters").labels;
    assert!(labels.contains_key("app"), "the label filter is registered: {labels:?}");

    let pid = child.id().expect("still running");
    std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    let out = tokio::time::timeout(T, child.wait_with_output()).await.expect("it exits after SIGTERM").unwrap();
    assert!(out.status.success(), "it exits cleanly on SIGTERM: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
}
