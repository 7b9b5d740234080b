//! The bench's Rust handler server (Kopf's example 01 written with the SDK) in a process of
//! its own, so that the bench counts its CPU and memory with the controller's: `create_fn`
//! returns `{"message": "hello world"}` and notes `NAME TIME_NS` per call in the file named
//! by `BENCH_RECORD`; `--delete` adds a `delete_fn` that does nothing. It listens where
//! `BOSUN_LISTEN` says.

use std::sync::Arc;

use bosun_sdk::{Cause, HandlerError, Operator};
use bosun_tests::record::Recorder;
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let with_delete = std::env::args().skip(1).any(|a| a == "--delete");
    let record = Arc::new(Recorder::from_env()?);
    let mut operator = Operator::new()
        .server_name("bench")
        .on_create("kopf.dev/v1/kopfexamples", move |cause: Cause| {
            record.note(cause.name());
            async { Ok::<_, HandlerError>(json!({"message": "hello world"})) }
        })
        .id("create_fn");
    if with_delete {
        operator = operator.on_delete("kopf.dev/v1/kopfexamples", |_: Cause| async { Ok::<_, HandlerError>(Value::Null) }).id("delete_fn");
    }
    operator.serve_default().await?;
    Ok(())
}
