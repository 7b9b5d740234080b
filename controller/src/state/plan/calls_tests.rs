//! Table tests of the calls a cycle makes: depth first through sub-handlers, and parents
//! finished by their sub-handlers or, where their server finishes parents, by a call of their
//! own whose answer decides.

use super::super::tests::{World, body, handle, now, success};
use super::super::*;

/// A world of create handlers whose server finishes parents (or not).
fn world(ids: &[&str], finishes_parents: bool) -> World {
    let mut w = World::new(&ids.iter().map(|id| (*id, pb::HandlerKind::Create)).collect::<Vec<_>>());
    w.handlers = w.handlers.into_iter().map(|h| Arc::new(Handler { finishes_parents, ..(*h).clone() })).collect();
    w
}

/// What one cycle did: each call (its id and the sub-handlers it finishes), the writes, what
/// comes next, and the lines.
struct Ran {
    calls: Vec<(String, Vec<String>)>,
    writes: Writes,
    next: Next,
    lines: Vec<String>,
}

impl Ran {
    fn progress(&self, id: &str) -> &Value {
        &self.writes.status["status"]["bosun.dev"]["progress"][id]
    }

    fn said(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l == line)
    }
}

/// Runs one cycle of `b`, answering each call with `answer(invocation, how many calls of it
/// came before in this cycle)`.
fn run(w: &World, b: &Value, answer: impl Fn(&Invocation, usize) -> pb::HandleResponse) -> Ran {
    let mut cycle = handle(w, b);
    let mut calls: Vec<(String, Vec<String>)> = Vec::new();
    while let Some(inv) = cycle.next_call() {
        let before = calls.iter().filter(|(id, _)| *id == inv.id).count();
        calls.push((inv.id.clone(), inv.finishes.clone()));
        cycle.absorb(&w.subject(), b, &inv, Ok(answer(&inv, before)));
    }
    let (writes, next) = cycle.conclude(&w.subject(), b, None);
    Ran { calls, writes, next, lines: cycle.take_lines().into_iter().map(|l| l.text).collect() }
}

/// The body after the cycle's writes.
fn after(b: &Value, ran: &Ran) -> Value {
    let mut next = b.clone();
    json_patch::merge(&mut next, &ran.writes.main);
    json_patch::merge(&mut next, &ran.writes.status);
    next
}

fn declares(ids: &[&str]) -> pb::HandleResponse {
    let subhandlers = ids.iter().map(|id| pb::SubHandler { id: (*id).into(), ..Default::default() }).collect();
    pb::HandleResponse { subhandlers, ..success() }
}

fn failed(outcome: pb::Outcome, message: &str, delay: Option<f64>) -> pb::HandleResponse {
    pb::HandleResponse { outcome: outcome as i32, message: message.into(), delay_seconds: delay, ..Default::default() }
}

fn call(id: &str, finishes: &[&str]) -> (String, Vec<String>) {
    (id.to_string(), finishes.iter().map(|f| f.to_string()).collect())
}

#[test]
fn sub_handlers_are_called_depth_first_and_finish_their_parent() {
    let w = World::new(&[("p", pb::HandlerKind::Create), ("q", pb::HandlerKind::Create)]);
    let b = body(json!({}), false, false, None, json!({}));
    let ran = run(&w, &b, |inv, _| match inv.id.as_str() {
        "p" => pb::HandleResponse {
            subhandlers: vec![
                pb::SubHandler { id: "a".into(), param: b"1".to_vec(), ..Default::default() },
                pb::SubHandler { id: "b".into(), ..Default::default() },
            ],
            ..success()
        },
        "p/a" => {
            assert_eq!((inv.parent.as_deref(), inv.param.clone()), (Some("p"), Some(json!(1))));
            success()
        }
        "p/b" => failed(pb::Outcome::TemporaryError, "later", Some(5.0)),
        _ => success(),
    });
    // `q` is left to the next cycle (Kopf's order: `p`'s outcome is written first), which
    // comes at once; `p`'s sub-handlers run within its cycle.
    assert_eq!(ran.calls, [call("p", &[]), call("p/a", &[]), call("p/b", &[])]);
    assert_eq!(ran.next, Next::Now);
    assert!(ran.progress("q")["started"].is_string() && ran.progress("q").get("success").is_none(), "{}", ran.writes.status);
    let ran2 = run(&w, &after(&b, &ran), |_, _| success());
    assert_eq!(ran2.calls, [call("q", &[])], "then q, and p/b not before its delay");
    assert_eq!(ran2.next, Next::WakeAt(now() + chrono::Duration::seconds(5)), "the sub-handler's delay");
    assert_eq!(ran.progress("p")["subrefs"], json!(["p/a", "p/b"]));
    assert_eq!(ran.progress("p/a")["success"], json!(true));
    assert_eq!(ran.progress("p/b")["retries"], json!(1));
    assert!(ran.progress("p").get("success").is_none(), "the parent waits for its sub-handlers: {}", ran.writes.status);
    assert!(!ran.said("Handler 'p' succeeded."), "{:?}", ran.lines);
}

#[test]
fn invalid_sub_handler_ids_are_the_parents_error() {
    let w = World::new(&[("p", pb::HandlerKind::Create)]);
    let b = body(json!({}), false, false, None, json!({}));
    let ran = run(&w, &b, |_, _| declares(&["has space"]));
    assert_eq!(ran.calls, [call("p", &[])]);
    assert!(ran.lines.iter().any(|l| l.contains("sub-handler id 'has space' is not valid")), "{:?}", ran.lines);
}

/// Parent `p` declares `a` (which succeeds) and `b` (which fails for good); `p`'s second call,
/// where its server finishes parents, answers as the row says.
#[test]
fn a_parent_whose_server_finishes_parents_is_called_once_its_sub_handlers_are_done_and_its_answer_decides() {
    let b = body(json!({}), false, false, None, json!({}));
    let with_result = pb::HandleResponse { result: b"{\"sum\":2}".to_vec(), ..success() };
    let later = |s: i64| Next::WakeAt(now() + chrono::Duration::seconds(s));
    // (server finishes parents, p's finishing answer, calls, next, p's result, p's retries, a line, its summary)
    type Row<'a> = (bool, pb::HandleResponse, Vec<(String, Vec<String>)>, Next, Value, Value, &'a str, Option<&'a str>);
    let (first, a, b_) = (call("p", &[]), call("p/a", &[]), call("p/b", &[]));
    let finishing = call("p", &["a", "b"]);
    let rows: Vec<Row> = vec![
        // Without the flag, the parent fails with its sub-handler, uncalled.
        (
            false,
            success(),
            vec![first.clone(), a.clone(), b_.clone()],
            Next::Idle,
            Value::Null,
            Value::Null,
            "Handler 'p' failed permanently: sub-handler(s) failed: p/b",
            Some("Creation is processed: 0 succeeded; 1 failed."),
        ),
        // With it, a failed sub-handler does not fail the parent: its own answer does.
        (
            true,
            with_result,
            vec![first.clone(), a.clone(), b_.clone(), finishing.clone()],
            Next::Idle,
            json!({"sum": 2}),
            Value::Null,
            "Handler 'p' succeeded.",
            Some("Creation is processed: 1 succeeded; 0 failed."),
        ),
        (
            true,
            failed(pb::Outcome::PermanentError, "no", None),
            vec![first.clone(), a.clone(), b_.clone(), finishing.clone()],
            Next::Idle,
            Value::Null,
            Value::Null,
            "Handler 'p' failed permanently: no",
            Some("Creation is processed: 0 succeeded; 1 failed."),
        ),
        // Retried after its delay, or its backoff: the sub-handlers are not called again.
        (
            true,
            failed(pb::Outcome::TemporaryError, "not yet", Some(5.0)),
            vec![first.clone(), a.clone(), b_.clone(), finishing.clone()],
            later(5),
            Value::Null,
            json!(1),
            "Handler 'p' failed temporarily: not yet",
            None,
        ),
        (
            true,
            failed(pb::Outcome::UnexpectedError, "boom", None),
            vec![first.clone(), a.clone(), b_.clone(), finishing.clone()],
            later(60),
            Value::Null,
            json!(1),
            "Handler 'p' failed with an exception. Will retry. boom",
            None,
        ),
        // Declared again, its sub-handlers are known; a new one runs, and the next cycle comes
        // at once to finish the parent again.
        (
            true,
            declares(&["a", "b", "c"]),
            vec![first, a, b_, finishing, call("p/c", &[])],
            Next::Now,
            Value::Null,
            Value::Null,
            "Handler 'p' registered sub-handlers: p/c.",
            None,
        ),
    ];
    for (flag, answer, calls, next, result, retries, line, summary) in rows {
        let w = world(&["p"], flag);
        let ran = run(&w, &b, |inv, before| match (inv.id.as_str(), before) {
            ("p", 0) => declares(&["a", "b"]),
            ("p", _) => answer.clone(),
            ("p/b", _) => failed(pb::Outcome::PermanentError, "b broke", None),
            _ => success(),
        });
        let row = format!("finishes parents: {flag}, answer {answer:?}");
        assert_eq!(ran.calls, calls, "{row}");
        assert_eq!(ran.next, next, "{row}");
        assert_eq!(ran.writes.status["status"]["p"], result, "{row}: {}", ran.writes.status);
        assert_eq!(ran.progress("p")["retries"], retries, "{row}: {}", ran.writes.status);
        assert!(ran.said(line), "{row}: {:?}", ran.lines);
        match summary {
            Some(s) => assert!(ran.said(s), "{row}: {:?}", ran.lines),
            None => assert!(ran.progress("p")["subrefs"].is_array(), "{row}: the parent goes on: {}", ran.writes.status),
        }
        assert_eq!(
            ran.lines.iter().filter(|l| l.starts_with("Handler 'p' succeeded.")).count(),
            usize::from(line == "Handler 'p' succeeded.")
        );
    }
}

#[test]
fn a_parent_finished_again_after_its_new_sub_handler_ran_in_the_next_cycle() {
    let w = world(&["p"], true);
    let b = body(json!({}), false, false, None, json!({}));
    let answer = |inv: &Invocation, _: usize| match (inv.id.as_str(), inv.finishes.len()) {
        ("p", 0) => declares(&["a"]),
        ("p", 1) => declares(&["a", "c"]),
        ("p", _) => declares(&["a", "c"]),
        _ => success(),
    };
    let first = run(&w, &b, answer);
    assert_eq!(first.next, Next::Now);
    let second = run(&w, &after(&b, &first), answer);
    assert_eq!(second.calls, [call("p", &["a", "c"])], "the new sub-handler is not run again");
    assert!(second.said("Handler 'p' succeeded."), "{:?}", second.lines);
    assert!(second.said("Creation is processed: 1 succeeded; 0 failed."), "{:?}", second.lines);
}

#[test]
fn a_restarted_controller_finishes_a_parent_whose_sub_handlers_are_done_without_running_them_again() {
    let progress = json!({
        "p": {"purpose": "create", "started": "2026-01-01T00:00:00.000000+00:00", "subrefs": ["p/a", "p/b"]},
        "p/a": {"purpose": "create", "success": true, "stopped": "2026-01-01T00:00:00.000000+00:00"},
        "p/b": {"purpose": "create", "failure": true, "message": "b broke"},
    });
    let b = body(json!({}), false, false, None, progress);
    let ran = run(&world(&["p"], true), &b, |_, _| success());
    assert_eq!(ran.calls, [call("p", &["a", "b"])]);
    assert!(ran.said("Handler 'p' succeeded."), "{:?}", ran.lines);
    // Its retries and timeout count as for any call: over its limit, it fails uncalled.
    let progress = json!({
        "p": {"purpose": "create", "started": "2026-01-01T00:00:00.000000+00:00", "subrefs": ["p/a"], "retries": 2},
        "p/a": {"purpose": "create", "success": true},
    });
    let mut w = world(&["p"], true);
    w.handlers = vec![Arc::new(Handler { retries: Some(2), ..(*w.handlers[0]).clone() })];
    let ran = run(&w, &body(json!({}), false, false, None, progress), |_, _| success());
    assert!(ran.calls.is_empty(), "{:?}", ran.calls);
    assert!(ran.said("Handler 'p' failed permanently: Handler 'p' has exceeded 2 retries."), "{:?}", ran.lines);
}

#[test]
fn nested_parents_are_finished_with_their_own_sub_handlers_ids_innermost_first() {
    let w = world(&["p"], true);
    let b = body(json!({}), false, false, None, json!({}));
    let parents: std::cell::RefCell<Vec<(String, Option<String>)>> = Default::default();
    let ran = run(&w, &b, |inv, _| {
        parents.borrow_mut().push((inv.id.clone(), inv.parent.clone()));
        match (inv.id.as_str(), inv.finishes.is_empty()) {
            ("p", true) => declares(&["a"]),
            ("p/a", true) => declares(&["x"]),
            _ => success(),
        }
    });
    assert_eq!(ran.calls, [call("p", &[]), call("p/a", &[]), call("p/a/x", &[]), call("p/a", &["x"]), call("p", &["a"])]);
    assert_eq!(parents.borrow()[3], ("p/a".to_string(), Some("p".to_string())), "the inner parent is still its parent's sub-handler");
    assert!(ran.said("Handler 'p/a' succeeded.") && ran.said("Handler 'p' succeeded."), "{:?}", ran.lines);
    assert_eq!(ran.next, Next::Idle);
}

/// Records on the object that no handler wrote: anyone who may edit the object may write them.
/// The handler whose records cannot be followed fails for good (with a Warning event), the
/// other handlers run, and the cycle ends.
#[test]
fn malformed_sub_handler_records_fail_their_handler_alone() {
    let w = World::new(&[("p", pb::HandlerKind::Create), ("q", pb::HandlerKind::Create)]);
    let rec = |subrefs: Vec<String>| json!({"purpose": "create", "subrefs": subrefs});
    let chain: serde_json::Map<String, Value> = (0..=MAX_DEPTH + 1)
        .map(|n| {
            let id = |n: usize| std::iter::once("p".to_string()).chain((0..n).map(|i| i.to_string())).collect::<Vec<_>>().join("/");
            (id(n), rec(vec![id(n + 1)]))
        })
        .collect();
    let wide: Vec<String> = (0..MAX_RECORDS + 10).map(|n| format!("p/{n}")).collect();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("itself", json!({"p": rec(vec!["p".into()])}), "sub-handler 'p' is listed under itself (by 'p'): a cycle"),
        (
            "a longer cycle",
            json!({"p": rec(vec!["p/a".into()]), "p/a": rec(vec!["p".into()])}),
            "sub-handler 'p' is listed under itself (by 'p/a'): a cycle",
        ),
        ("twice", json!({"p": rec(vec!["p/a".into(), "p/a".into()])}), "sub-handler 'p/a' is listed twice by 'p'"),
        ("another's", json!({"p": rec(vec!["q".into()])}), "sub-handler 'q' of 'p' is not named 'p/…'"),
        ("too deep", Value::Object(chain), "sub-handlers are nested deeper than 32 levels"),
        ("too many", json!({"p": rec(wide)}), "they name more than 4096 sub-handlers"),
    ];
    for (what, progress, why) in cases {
        let b = body(json!({}), false, false, None, progress);
        let ran = run(&w, &b, |_, _| success());
        let line = format!("Handler 'p' failed permanently: its progress records on the object are malformed: {why}");
        assert!(ran.lines.iter().any(|l| l.starts_with(&line)), "{what}: no {line:?} in {:#?}", ran.lines);
        assert!(ran.calls.iter().all(|(id, _)| !id.starts_with("p")), "{what}: {:?}", ran.calls);
        assert!(ran.calls.contains(&call("q", &[])), "{what}: the other handler runs: {:?}", ran.calls);
        assert!(ran.said("Creation is processed: 1 succeeded; 1 failed."), "{what}: {:?}", ran.lines);
        assert_eq!(ran.next, Next::Idle, "{what}");
        let event = ran.writes.events.iter().find(|e| e.reason == "MalformedProgress").expect("a Warning event");
        assert_eq!((event.r#type.as_str(), event.message.starts_with(&line)), ("Warning", true), "{what}");
        // The cause is over: the malformed records are removed with the others.
        let written = after(&b, &ran);
        assert!(written["status"]["bosun.dev"].get("progress").is_none(), "{what}: {:#}", written["status"]);
    }
}

#[test]
fn a_retry_count_at_its_maximum_does_not_overflow() {
    let w = World::new(&[("p", pb::HandlerKind::Create)]);
    let b = body(json!({}), false, false, None, json!({"p": {"purpose": "create", "retries": u32::MAX}}));
    let ran = run(&w, &b, |_, _| failed(pb::Outcome::TemporaryError, "later", Some(1.0)));
    assert_eq!(ran.progress("p")["retries"], json!(u32::MAX));
}
