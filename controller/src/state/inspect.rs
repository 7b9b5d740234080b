//! `bosun inspect`: what the controller's marks on one object say, in words. The cause in
//! progress, each handler's record (retries, next attempt, last message, result), the
//! finalizer and why it is there, the diffbase and when it was written; and, when nothing
//! runs, why not. Pure: the object and the time in, the report out.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::progress::{ProgressRecord, parse_time};
use super::storage::Storage;
use crate::object;

/// The diffbase's name in annotations and in the status stanza.
const DIFFBASE: &str = "last-handled-configuration";

/// How long ago or ahead, in words (`12s ago`, `in 3m 5s`).
fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (t - now).num_seconds();
    let span = |s: i64| {
        let (h, m, s) = (s / 3600, s % 3600 / 60, s % 60);
        match (h, m) {
            (0, 0) => format!("{s}s"),
            (0, _) => format!("{m}m {s}s"),
            _ => format!("{h}h {m}m"),
        }
    };
    match secs {
        0 => "now".to_string(),
        s if s > 0 => format!("in {}", span(s)),
        s => format!("{} ago", span(-s)),
    }
}

/// A handler's state in words.
fn handler_line(id: &str, r: &ProgressRecord, result: Option<&Value>, now: DateTime<Utc>) -> String {
    let when = |t: &Option<String>| t.as_deref().and_then(parse_time).map(|t| relative(t, now));
    let retries = r.retries.unwrap_or(0);
    let message = r.message.as_deref().map(|m| format!("; last message: {m}")).unwrap_or_default();
    let state = if r.success == Some(true) {
        let result = result.map(|v| format!("; result: {v}")).unwrap_or_default();
        format!("succeeded {}{}{result}", when(&r.stopped).unwrap_or_default(), tries(retries))
    } else if r.failure == Some(true) {
        format!("failed permanently {}{}{message}", when(&r.stopped).unwrap_or_default(), tries(retries))
    } else {
        let next = match r.delayed_until() {
            Some(t) if t > now => format!("next attempt {} ({})", relative(t, now), super::progress::format_time(t)),
            _ => "due now (waits for a controller to run it)".to_string(),
        };
        let failed = if retries == 0 { "not attempted yet or in flight".to_string() } else { format!("{retries} attempt(s) failed") };
        format!("retrying: {failed}; {next}{message}")
    };
    let started = when(&r.started).map(|s| format!(" [started {s}]")).unwrap_or_default();
    format!("  {id}: {state}{started}")
}

fn tries(retries: u32) -> String {
    if retries == 0 { String::new() } else { format!(" after {retries} failed attempt(s)") }
}

/// When the diffbase was last written, from the object's managedFields: the newest entry whose
/// fields hold it.
fn diffbase_written(body: &Value, storage: &Storage) -> Option<DateTime<Utc>> {
    let key = format!("f:{}/{DIFFBASE}", storage.prefix);
    object::meta(body, "managedFields")?
        .as_array()?
        .iter()
        .filter(|m| {
            let fields = m.get("fieldsV1").map(Value::to_string).unwrap_or_default();
            fields.contains(&key)
                || (fields.contains(&format!("f:{}", storage.status_stanza())) && fields.contains(&format!("f:{DIFFBASE}")))
        })
        .filter_map(|m| m.get("time").and_then(Value::as_str).and_then(|t| DateTime::parse_from_rfc3339(t).ok()))
        .map(|t| t.with_timezone(&Utc))
        .max()
}

/// The report on `body` as the controller with these storage settings sees it at `now`.
pub fn explain(body: &Value, storage: &Storage, now: DateTime<Utc>) -> String {
    let meta = |k: &str| object::meta_str(body, k);
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("object");
    let at = object::object_ref(body).path();
    let mut out = vec![format!("{kind} {at} (uid {}, resourceVersion {})", meta("uid"), meta("resourceVersion"))];

    let state = storage.read(body, storage.recorded_ids(body).iter().map(String::as_str));
    let deleting = !meta("deletionTimestamp").is_empty();
    let purposes: std::collections::BTreeSet<&str> =
        state.progress.values().filter(|r| !r.finished()).filter_map(|r| r.purpose.as_deref()).collect();
    let cause = match (purposes.iter().next(), deleting) {
        (Some(p), _) => {
            format!("Cause in progress: {p} ({} handler(s) not finished).", state.progress.values().filter(|r| !r.finished()).count())
        }
        (None, true) => "Cause: delete (no handler record yet).".to_string(),
        (None, false) if state.diffbase.is_none() => {
            "Cause: none recorded. The object was never handled: is a controller serving this resource (not paused by a peer, \
             this object in its shard), and does a handler match it?"
                .to_string()
        }
        (None, false) => "Cause: none in progress. The object was handled; handlers run again when its essence (spec, labels, \
             annotations other than the controller's) changes, or on resume for resume handlers."
            .to_string(),
    };
    out.push(cause);

    if !state.progress.is_empty() {
        out.push("Handlers:".to_string());
        for (id, r) in &state.progress {
            let result = body.pointer(&format!("/status/{id}"));
            out.push(handler_line(id, r, result, now));
        }
    }

    let finalizer = if storage.has_finalizer(body) {
        if deleting {
            format!(
                "Finalizer {}: present; the deletion waits for it (requested {}): the controller removes it once the deletion \
                 handlers succeeded and the daemons have stopped.",
                storage.finalizer,
                parse_time(meta("deletionTimestamp")).map(|t| relative(t, now)).unwrap_or_default()
            )
        } else {
            format!(
                "Finalizer {}: present, so that a deletion waits for the controller: there are deletion handlers, timers or \
                 daemons for this object.",
                storage.finalizer
            )
        }
    } else {
        format!("Finalizer {}: absent (no deletion handler, timer or daemon needs the deletion to wait).", storage.finalizer)
    };
    out.push(finalizer);

    out.push(match (&state.diffbase, diffbase_written(body, storage)) {
        (None, _) => "Diffbase: none (the object's creation has not been handled to the end).".to_string(),
        (Some(d), Some(t)) => format!("Diffbase: {} bytes, written {}.", d.len(), relative(t, now)),
        (Some(d), None) => format!("Diffbase: {} bytes.", d.len()),
    });
    let mut text = out.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::storage::StorageKind;
    use serde_json::json;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn reports_say_what_runs_and_why() {
        let now = at("2026-11-23T08:00:00Z");
        let storage = Storage::bosun("bosun.dev", StorageKind::Status);
        let base = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": "x", "namespace": "default", "uid": "u1", "resourceVersion": "7"}});
        let with = |extra: Value| {
            let mut b = base.clone();
            json_patch::merge(&mut b, &extra);
            b
        };
        let retrying = with(json!({"metadata": {"finalizers": ["bosun.dev/finalizer"]}, "status": {"bosun.dev": {"progress": {
            "create_fn": {"started": "2026-11-23T07:59:40.000000+00:00", "purpose": "create", "retries": 2,
                          "delayed": "2026-11-23T08:00:08.000000+00:00", "message": "not yet"},
            "other_fn": {"started": "2026-11-23T07:59:40.000000+00:00", "stopped": "2026-11-23T07:59:41.000000+00:00",
                         "purpose": "create", "success": true}}}, "other_fn": {"ok": 1}}}));
        let handled = with(json!({
            "metadata": {"managedFields": [{"manager": "bosun", "operation": "Update", "subresource": "status",
                "time": "2026-11-23T07:55:00Z", "fieldsV1": {"f:status": {"f:bosun.dev": {"f:last-handled-configuration": {}}}}}]},
            "status": {"bosun.dev": {"last-handled-configuration": "{\"spec\":{}}"}}}));
        let deleting = with(json!({"metadata": {"finalizers": ["bosun.dev/finalizer"], "deletionTimestamp": "2026-11-23T07:59:00Z"}}));
        let cases: [(&str, &Value, &[&str]); 4] = [
            (
                "a temporarily failing handler shows its next attempt",
                &retrying,
                &[
                    "KopfExample default/x (uid u1, resourceVersion 7)",
                    "Cause in progress: create (1 handler(s) not finished).",
                    "  create_fn: retrying: 2 attempt(s) failed; next attempt in 8s (2026-11-23T08:00:08.000000+00:00); last message: not yet [started 20s ago]",
                    "  other_fn: succeeded 19s ago; result: {\"ok\":1} [started 20s ago]",
                    "Finalizer bosun.dev/finalizer: present, so that a deletion waits",
                    "Diffbase: none",
                ],
            ),
            ("never handled", &base, &["Cause: none recorded. The object was never handled", "Finalizer bosun.dev/finalizer: absent"]),
            ("handled and idle", &handled, &["Cause: none in progress. The object was handled", "Diffbase: 11 bytes, written 5m 0s ago."]),
            ("being deleted", &deleting, &["Cause: delete (no handler record yet).", "the deletion waits for it (requested 1m 0s ago)"]),
        ];
        for (what, body, wants) in cases {
            let report = explain(body, &storage, now);
            for want in wants {
                assert!(report.contains(want), "{what}: no {want:?} in:\n{report}");
            }
        }
    }

    #[test]
    fn times_read_in_words() {
        let now = at("2026-11-23T08:00:00Z");
        let cases = [
            ("2026-11-23T08:00:00Z", "now"),
            ("2026-11-23T08:00:08Z", "in 8s"),
            ("2026-11-23T07:57:55Z", "2m 5s ago"),
            ("2026-11-23T10:30:00Z", "in 2h 30m"),
        ];
        for (t, want) in cases {
            assert_eq!(relative(at(t), now), want);
        }
    }
}
