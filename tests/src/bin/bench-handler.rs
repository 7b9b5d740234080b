//! The bench's Rust handler server (Kopf's example 01 written with the SDK) in a process of
//! its own, so that the bench counts its CPU and memory with the controller's: `create_fn`
//! returns `{"message": "hello world"}` and notes `NAME TIME_NS` per call in the file named
//! by `BENCH_RECORD`; `--delete` adds a `delete_fn` that does nothing. It listens where
//! `BOSUN_LISTEN` says.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let with_delete = std::env::args().skip(1).any(|a| a == "--delete");
    let record_path = std::env::var_os("BENCH_RECORD").ok_or_else(|| anyhow::anyhow!("BENCH_RECORD is not set"))?;
    let record = Arc::new(Mutex::new(std::fs::OpenOptions::new().append(true).create(true).open(record_path)?));
    let mut operator = Operator::new()
        .server_name("bench")
        .on_create("kopf.dev/v1/kopfexamples", move |cause: Cause| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
            // A failed note only loses a latency sample; the bench then waits for it and says so.
            let _ = writeln!(record.lock().unwrap_or_else(|e| e.into_inner()), "{} {now}", cause.name());
            async { Ok::<_, HandlerError>(json!({"message": "hello world"})) }
        })
        .id("create_fn");
    if with_delete {
        operator = operator.on_delete("kopf.dev/v1/kopfexamples", |_: Cause| async { Ok::<_, HandlerError>(Value::Null) }).id("delete_fn");
    }
    operator.serve_default().await?;
    Ok(())
}
