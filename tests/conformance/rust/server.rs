//! The Rust SDK's conformance server: exactly the handler set of `tests/conformance/README.md`,
//! registered with `bosun_sdk::Operator` and served where `BOSUN_LISTEN` says. The scenarios in
//! `tests/tests/conformance.rs` run the real controller against it, and against the Python
//! SDK's server (`tests/conformance/python/server.py`), and expect the same outcomes.
//!
//! Every handler's behaviour is driven by the handled object's spec, so that one server serves
//! every scenario; handlers whose spec key is absent do nothing and return nothing.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bosun_sdk::{Cause, HandlerError, Operator, PermanentError, TemporaryError};
use serde_json::{Value, json};

/// The resource every object handler serves: Kopf's KopfExample (`examples/crd.yaml`).
const KEX: &str = "kopf.dev/v1/kopfexamples";
/// The label that opts an object into the timer.
const TIMER_LABEL: &str = "conformance.bosun.dev/timer";
/// The label that opts an object into the daemon.
const DAEMON_LABEL: &str = "conformance.bosun.dev/daemon";
/// The label that opts an object into the silent daemon.
const SILENT_LABEL: &str = "conformance.bosun.dev/silent";
/// The label that opts an object into the patching daemon.
const PATCHER_LABEL: &str = "conformance.bosun.dev/patcher";
/// How often the patching daemon patches its beat.
const BEAT: Duration = Duration::from_millis(100);
/// The delay of the `errors` handler's temporary errors, and its backoff.
const RETRY_DELAY: Duration = Duration::from_millis(500);

/// The `retry` at which the startup activity succeeded in this process; -1 before.
static STARTUP_RETRY: AtomicI64 = AtomicI64::new(-1);
/// The timer's calls so far, per object uid.
static TICKS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    let operator = Operator::new()
        .server_name("conformance-rust")
        .on_startup(startup)
        .id("startup")
        .on_probe(probe)
        .id("probe")
        .on_cleanup(cleanup)
        .id("cleanup")
        .on_create(KEX, create)
        .id("create")
        .on_update(KEX, update)
        .id("update")
        .on_field(KEX, "spec.field", field)
        .id("field")
        .on_resume(KEX, resume)
        .id("resume")
        .on_delete(KEX, delete)
        .id("delete")
        .on_create(KEX, errors)
        .id("errors")
        .backoff(RETRY_DELAY)
        .on_create(KEX, patch)
        .id("patch")
        .on_create(KEX, events)
        .id("events")
        .on_create(KEX, children)
        .id("children")
        .on_create(KEX, subhandlers)
        .id("subhandlers")
        .subhandlers(subhandler)
        .on_timer(KEX, Duration::from_millis(500), timer)
        .id("timer")
        .label(TIMER_LABEL, "yes")
        .on_daemon(KEX, daemon)
        .id("daemon")
        .label(DAEMON_LABEL, "yes")
        .on_daemon(KEX, silent)
        .id("silent")
        .label(SILENT_LABEL, "yes")
        .on_daemon(KEX, patcher)
        .id("patcher")
        .label(PATCHER_LABEL, "yes")
        .on_create(KEX, crash)
        .id("crash")
        .backoff(RETRY_DELAY);
    // The changed registry of a server started again with `CONFORMANCE_EXTRA` set.
    if std::env::var_os("CONFORMANCE_EXTRA").is_some() {
        return operator.on_create(KEX, extra).id("extra").serve_default().await;
    }
    operator.serve_default().await
}

/// Fails temporarily on its first attempt, then remembers that it ran.
async fn startup(cause: Cause) -> Result<(), HandlerError> {
    let retry = cause.retry();
    if retry == 0 {
        return Err(TemporaryError::new("conformance: startup not ready at retry 0").delay(Duration::from_millis(200)).into());
    }
    STARTUP_RETRY.store(i64::from(retry), Ordering::SeqCst);
    cause.info("conformance: startup ran");
    Ok(())
}

async fn probe(_: Cause) -> Result<Value, HandlerError> {
    Ok(json!({"alive": true}))
}

async fn cleanup(cause: Cause) -> Result<(), HandlerError> {
    cause.info("conformance: cleanup ran");
    Ok(())
}

async fn create(cause: Cause) -> Result<Value, HandlerError> {
    let startup = STARTUP_RETRY.load(Ordering::SeqCst);
    let startup = if startup < 0 { Value::Null } else { json!(startup) };
    Ok(json!({"message": "created", "field": cause.spec()["field"], "startup": startup}))
}

async fn update(cause: Cause) -> Result<Value, HandlerError> {
    Ok(json!({"message": "updated", "field": cause.spec()["field"]}))
}

async fn field(cause: Cause) -> Result<Value, HandlerError> {
    Ok(json!({"old": cause.old(), "new": cause.new()}))
}

async fn resume(_: Cause) -> Result<Value, HandlerError> {
    Ok(json!({"message": "resumed"}))
}

async fn delete(cause: Cause) -> Result<(), HandlerError> {
    cause.info_event("Deleting", format!("conformance: deleting {}", cause.name()));
    Ok(())
}

/// Fails as `spec.fail` says until `spec.retriesBeforeSuccess` attempts failed.
async fn errors(cause: Cause) -> Result<Value, HandlerError> {
    let Some(fail) = cause.spec()["fail"].as_str() else { return Ok(Value::Null) };
    let retry = cause.retry();
    cause.patch().status("attempts", retry + 1);
    let before = cause.spec()["retriesBeforeSuccess"].as_u64().unwrap_or(2);
    let failing = u64::from(retry) < before;
    match fail {
        "permanent" => Err(PermanentError::new("conformance: permanent failure").into()),
        "temporary" if failing => {
            Err(TemporaryError::new(format!("conformance: temporary failure at retry {retry}")).delay(RETRY_DELAY).into())
        }
        "unexpected" if failing => Err(std::io::Error::other(format!("conformance: unexpected failure at retry {retry}")).into()),
        "temporary" | "unexpected" => Ok(json!({"retry": retry})),
        other => Err(PermanentError::new(format!("conformance: unknown spec.fail {other:?}")).into()),
    }
}

/// Applies `spec.patch` as its merge patch, with a `null` for each label of `spec.removeLabels`
/// (the API server keeps no nulls in a spec, so they cannot come from `spec.patch`).
async fn patch(cause: Cause) -> Result<(), HandlerError> {
    if let Some(fragment) = cause.spec().get("patch").filter(|p| p.is_object()) {
        cause.patch().merge(fragment.clone());
    }
    for key in cause.spec()["removeLabels"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        cause.patch().remove_label(key);
    }
    Ok(())
}

/// Posts every event of `spec.events` about the object.
async fn events(cause: Cause) -> Result<(), HandlerError> {
    for event in cause.spec()["events"].as_array().into_iter().flatten() {
        let text = |key: &str| event[key].as_str().unwrap_or_default().to_string();
        cause.event(text("type"), text("reason"), text("message"));
    }
    Ok(())
}

/// Has the controller create and adopt a ConfigMap with `spec.child` as its data.
async fn children(cause: Cause) -> Result<Value, HandlerError> {
    let Some(data) = cause.spec().get("child") else { return Ok(Value::Null) };
    cause.adopt(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": data}));
    Ok(json!({"message": "child requested"}))
}

/// Declares one sub-handler per item of `spec.items`, with the item as its parameter.
async fn subhandlers(cause: Cause) -> Result<(), HandlerError> {
    for item in cause.spec()["items"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        cause.subhandler(item, json!(item));
    }
    Ok(())
}

async fn subhandler(cause: Cause) -> Result<Value, HandlerError> {
    Ok(json!({"item": cause.param()}))
}

/// Counts its calls per object (in the process: the object a timer gets may be older than the
/// controller's last write) and patches the count into `status.ticks`.
async fn timer(cause: Cause) -> Result<(), HandlerError> {
    let ticks = {
        let mut ticks = TICKS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = ticks.entry(cause.uid().to_string()).or_insert(0);
        *count += 1;
        *count
    };
    cause.patch().status("ticks", ticks);
    Ok(())
}

/// Says it started (a log line and an event), waits to be stopped, and says so on stdout.
async fn daemon(cause: Cause) -> Result<(), HandlerError> {
    cause.info("conformance: daemon started");
    cause.info_event("DaemonStarted", "conformance: daemon started");
    cause.stopped().wait().await;
    println!("conformance: daemon stopped for {}/{}", cause.namespace().unwrap_or_default(), cause.name());
    Ok(())
}

/// Sends nothing while it runs (it says so on stdout only), and takes 1 s to wind down once
/// stopped: the controller must wait for it all the same.
async fn silent(cause: Cause) -> Result<(), HandlerError> {
    let at = format!("{}/{}", cause.namespace().unwrap_or_default(), cause.name());
    println!("conformance: silent daemon started for {at}");
    cause.stopped().wait().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("conformance: silent daemon stopped for {at}");
    Ok(())
}

/// Patches its beat count every 100 ms while it runs (the Rust SDK sends each patch at once),
/// and once more when stopped, as it ends.
async fn patcher(cause: Cause) -> Result<(), HandlerError> {
    let at = format!("{}/{}", cause.namespace().unwrap_or_default(), cause.name());
    println!("conformance: patcher started for {at}");
    let mut beats = 0u64;
    while !cause.stopped().is_stopped() {
        tokio::select! {
            () = cause.stopped().wait() => {}
            () = tokio::time::sleep(BEAT) => {
                beats += 1;
                cause.patch().status("beats", beats);
            }
        }
    }
    cause.patch().status("patcher", "stopped");
    println!("conformance: patcher stopped for {at}");
    Ok(())
}

/// On its first call for an object with `spec.crash`, ends its own server at once (as an OOM
/// kill or a segfault would: no answer, no cleanup); answers on the next call.
async fn crash(cause: Cause) -> Result<Value, HandlerError> {
    if cause.spec()["crash"].as_bool() != Some(true) {
        return Ok(Value::Null);
    }
    let retry = cause.retry();
    if retry == 0 {
        use std::io::Write as _;
        println!("conformance: crashing");
        let _ = std::io::stdout().flush();
        std::process::exit(3);
    }
    Ok(json!({"retry": retry}))
}

/// Registered only with `CONFORMANCE_EXTRA` set: returns `{"message": "extra"}`.
async fn extra(_: Cause) -> Result<Value, HandlerError> {
    Ok(json!({"message": "extra"}))
}
