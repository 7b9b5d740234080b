//! Table tests of the plan: cause × finalizer × deletion × stored state × first sight; the
//! calls a cycle makes (sub-handlers included); what it writes; refused patches.

use super::*;
use crate::state::essence::EssenceRules;
use crate::state::essence::encode_diffbase;
use crate::state::storage::{Storage, StorageKind};
use chrono::TimeZone;

pub(super) fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

pub(super) fn handler(id: &str, kind: pb::HandlerKind) -> Arc<Handler> {
    let spec = pb::HandlerSpec {
        id: id.into(),
        kind: kind as i32,
        resource: Some(pb::ResourceSelector { name: "kex".into(), ..Default::default() }),
        ..Default::default()
    };
    Arc::new(Handler::from_spec(&spec, 0).unwrap())
}

pub(super) struct World {
    pub(super) handlers: Vec<Arc<Handler>>,
    pub(super) storage: Storage,
    pub(super) rules: EssenceRules,
}

impl World {
    pub(super) fn new(kinds: &[(&str, pb::HandlerKind)]) -> World {
        World {
            handlers: kinds.iter().map(|(id, k)| handler(id, *k)).collect(),
            storage: Storage::bosun("bosun.dev", StorageKind::Status),
            rules: EssenceRules { own_prefixes: vec!["bosun.dev/".into()], ..Default::default() },
        }
    }

    pub(super) fn subject(&self) -> Subject<'_> {
        Subject { handlers: &self.handlers, storage: &self.storage, rules: &self.rules, has_status: true, status_keeps_unknown: true }
    }
}

/// A body: spec, whether the finalizer is on, whether deletion is requested, the stored
/// diffbase (an essence, in its annotation), and progress records (in status).
pub(super) fn body(spec: Value, finalizer: bool, deleting: bool, diffbase: Option<Value>, progress: Value) -> Value {
    let mut b = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": "n", "namespace": "ns", "uid": "u1", "resourceVersion": "5"}, "spec": spec});
    if finalizer {
        b["metadata"]["finalizers"] = json!(["bosun.dev/finalizer"]);
    }
    if deleting {
        b["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    let mut state = json!({});
    if let Some(d) = diffbase {
        b["metadata"]["annotations"] = json!({DIFFBASE_KEY: encode_diffbase(&d)});
    }
    if !progress.as_object().unwrap().is_empty() {
        state["progress"] = progress;
    }
    b["status"] = json!({"bosun.dev": state});
    b
}

/// Where the diffbase goes by default.
pub(super) const DIFFBASE_KEY: &str = "bosun.dev/last-handled-configuration";

/// The diffbase a main patch writes, `Null` when none.
pub(super) fn diffbase_in(main: &Value) -> &Value {
    &main["metadata"]["annotations"][DIFFBASE_KEY]
}

pub(super) fn success() -> pb::HandleResponse {
    pb::HandleResponse { outcome: pb::Outcome::Success as i32, ..Default::default() }
}

/// What `begin` decided, in one word, for the table.
pub(super) fn start_of(s: &Start) -> String {
    match s {
        Start::Idle(_) => "idle".into(),
        Start::AddFinalizer(..) => "add-finalizer".into(),
        Start::Handle(c) => {
            let ids: Vec<&str> = c.due.iter().map(|d| d.handler.id.as_str()).collect();
            format!("{}:{}", c.reason.purpose(), ids.join(","))
        }
    }
}

#[test]
fn causes_cross_finalizer_deletion_stored_state_and_first_sight() {
    use pb::HandlerKind as K;
    let with_delete = World::new(&[("c", K::Create), ("u", K::Update), ("d", K::Delete), ("r", K::Resume)]);
    let without = World::new(&[("c", K::Create), ("u", K::Update), ("r", K::Resume)]);
    let spec = json!({"a": 1});
    let same = Some(json!({"spec": {"a": 1}}));
    let older = Some(json!({"spec": {"a": 0}}));
    let resuming = json!({"r": {"purpose": "resume", "retries": 1}});
    // (world, finalizer, deleting, diffbase, progress, first sight) → start
    type Row<'a> = (&'a World, bool, bool, Option<Value>, Value, bool, &'a str);
    let table: Vec<Row> = vec![
        // A delete handler needs the finalizer first, before any other handler runs.
        (&with_delete, false, false, None, json!({}), true, "add-finalizer"),
        (&with_delete, false, false, same.clone(), json!({}), false, "add-finalizer"),
        (&with_delete, true, false, None, json!({}), true, "create:c"),
        (&with_delete, true, false, None, json!({}), false, "create:c"),
        (&with_delete, true, false, same.clone(), json!({}), true, "resume:r"),
        (&with_delete, true, false, same.clone(), json!({}), false, "idle"),
        // Changed while no controller watched: on first sight resume handlers join the update.
        (&with_delete, true, false, older.clone(), json!({}), true, "update:u,r"),
        (&with_delete, true, false, older.clone(), json!({}), false, "update:u"),
        (&with_delete, true, false, same.clone(), resuming.clone(), false, "resume:r"),
        (&with_delete, true, true, same.clone(), json!({}), false, "delete:d"),
        (&with_delete, true, true, None, json!({}), true, "delete:d"),
        // Being deleted without our finalizer: nothing to do, nothing to block.
        (&with_delete, false, true, same.clone(), json!({}), true, "idle"),
        (&with_delete, false, true, None, json!({}), false, "idle"),
        // Without handlers that need it, no finalizer is added and one write does it all.
        (&without, false, false, None, json!({}), true, "create:c"),
        (&without, false, false, None, json!({}), false, "create:c"),
        (&without, false, false, same.clone(), json!({}), true, "resume:r"),
        (&without, false, false, same.clone(), json!({}), false, "idle"),
        (&without, false, false, older.clone(), json!({}), false, "update:u"),
        (&without, false, true, same.clone(), json!({}), false, "idle"),
        // A leftover finalizer nobody needs is released (an empty cycle that writes it away).
        (&without, true, false, same.clone(), json!({}), false, "noop:"),
        (&without, true, true, same.clone(), json!({}), false, "delete:"),
    ];
    for (world, fin, del, base, progress, first, want) in table {
        let b = body(spec.clone(), fin, del, base.clone(), progress.clone());
        let got = start_of(&begin(&world.subject(), &b, None, first, now()));
        assert_eq!(got, want, "finalizer {fin}, deleting {del}, diffbase {base:?}, progress {progress}, first sight {first}");
    }
}

#[test]
fn causes_that_call_no_handler_say_so_in_kopfs_words() {
    use pb::HandlerKind as K;
    let world = World::new(&[("c", K::Create), ("u", K::Update)]);
    let filtered = {
        let mut spec = pb::HandlerSpec {
            id: "c".into(),
            kind: K::Create as i32,
            resource: Some(pb::ResourceSelector { name: "kex".into(), ..Default::default() }),
            ..Default::default()
        };
        let absent = pb::ValueFilter { check: Some(pb::value_filter::Check::Absent(true)) };
        spec.filters = Some(pb::Filters { labels: [("skip".to_string(), absent)].into(), ..Default::default() });
        let mut w = World::new(&[]);
        w.handlers = vec![Arc::new(Handler::from_spec(&spec, 0).unwrap())];
        w
    };
    let same = Some(json!({"spec": {"a": 1}}));
    const NOOP: &str = "Something has changed, but we are not interested (the essence is the same).";
    const FREE: &str = "Deletion, but we are done with it, and we do not care.";
    // (world, finalizer, deleting, labels) → the start and its lines
    type Row<'a> = (&'a World, bool, bool, Value, &'a str, Vec<&'a str>);
    let rows: Vec<Row> = vec![
        (&world, false, false, json!({}), "idle", vec![NOOP]),
        (&world, false, true, json!({}), "idle", vec![FREE]),
        // A leftover finalizer is released in a cycle of its own, which says the same.
        (&world, true, false, json!({}), "noop:", vec![NOOP]),
        // Objects no handler is for are not looked at (Kopf is blind to them too).
        (&filtered, false, false, json!({"skip": "yes"}), "idle", vec![]),
    ];
    for (w, fin, del, labels, want, want_lines) in rows {
        let mut b = body(json!({"a": 1}), fin, del, same.clone(), json!({}));
        b["metadata"]["labels"] = labels;
        let start = begin(&w.subject(), &b, None, false, now());
        let lines = match &start {
            Start::Idle(lines) => lines.clone(),
            Start::Handle(c) => c.lines.clone(),
            Start::AddFinalizer(_, lines) => lines.clone(),
        };
        assert_eq!(start_of(&start), want, "finalizer {fin}, deleting {del}");
        assert_eq!(lines.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(), want_lines, "finalizer {fin}, deleting {del}");
        assert!(lines.iter().all(|l| l.level == Level::Debug));
    }
}

#[test]
fn resume_handlers_run_on_deletion_only_when_they_ask_for_it() {
    let mut spec = pb::HandlerSpec {
        id: "r".into(),
        kind: pb::HandlerKind::Resume as i32,
        resource: Some(pb::ResourceSelector { name: "kex".into(), ..Default::default() }),
        ..Default::default()
    };
    let plain = handler("r", pb::HandlerKind::Resume);
    spec.options = Some(pb::HandlerOptions { deleted: true, ..Default::default() });
    let deleted = Arc::new(Handler::from_spec(&spec, 0).unwrap());
    let d = handler("d", pb::HandlerKind::Delete);
    let b = body(json!({}), true, true, Some(json!({"spec": {}})), json!({}));
    let cases = [(plain, true, "delete:d"), (deleted.clone(), true, "delete:r,d"), (deleted, false, "delete:d")];
    for (r, first, want) in cases {
        let mut w = World::new(&[]);
        w.handlers = vec![r, d.clone()];
        assert_eq!(start_of(&begin(&w.subject(), &b, None, first, now())), want, "first sight {first}");
    }
}

#[test]
fn resume_handlers_join_an_update_on_first_sight_once_per_id() {
    use pb::HandlerKind as K;
    let older = Some(json!({"spec": {"a": 0}}));
    let started = json!({"r": {"purpose": "update", "retries": 1}});
    // (handlers, first sight, progress) → start: Kopf mixes resume handlers into the causes of
    // its first listing, but never into a creation; one id (a function stacked for both kinds)
    // is called once.
    type Row<'a> = (Vec<(&'a str, K)>, bool, Value, &'a str);
    let rows: Vec<Row> = vec![
        (vec![("u", K::Update), ("r", K::Resume)], true, json!({}), "update:u,r"),
        (vec![("u", K::Update), ("r", K::Resume)], false, json!({}), "update:u"),
        (vec![("u", K::Update), ("r", K::Resume)], false, started, "update:u,r"),
        (vec![("fn", K::Update), ("fn", K::Resume)], true, json!({}), "update:fn"),
        (vec![("fn", K::Resume), ("fn", K::Update)], true, json!({}), "update:fn"),
    ];
    for (kinds, first, progress, want) in rows {
        let w = World::new(&kinds);
        let b = body(json!({"a": 1}), false, false, older.clone(), progress.clone());
        assert_eq!(start_of(&begin(&w.subject(), &b, None, first, now())), want, "{kinds:?}, first sight {first}, {progress}");
    }
    // A creation never: the object is new, whatever the listing.
    let w = World::new(&[("c", K::Create), ("r", K::Resume)]);
    assert_eq!(start_of(&begin(&w.subject(), &body(json!({"a": 1}), false, false, None, json!({})), None, true, now())), "create:c");
}

pub(super) fn handle(world: &World, b: &Value) -> Box<Cycle> {
    match begin(&world.subject(), b, None, false, now()) {
        Start::Handle(c) => c,
        other => panic!("expected handlers to call, got {}", start_of(&other)),
    }
}

#[test]
fn answers_become_records_patches_results_and_what_comes_next() {
    let world = World::new(&[("h", pb::HandlerKind::Create)]);
    let b = body(json!({"a": 1}), false, false, None, json!({}));
    let patch = |p: Value| serde_json::to_vec(&p).unwrap();
    let tmp = |delay: Option<f64>| pb::HandleResponse {
        outcome: pb::Outcome::TemporaryError as i32,
        message: "later".into(),
        delay_seconds: delay,
        ..Default::default()
    };
    // (reply, status.h result?, progress of h, next, a line)
    type Case<'a> = (Result<pb::HandleResponse, Answer>, Value, Value, Next, &'a str);
    let cases: Vec<Case> = vec![
        (
            Ok(pb::HandleResponse { result: b"{\"x\":1}".to_vec(), merge_patch: patch(json!({"spec": {"b": 2}})), ..success() }),
            json!({"x": 1}),
            Value::Null,
            Next::Idle,
            "Creation is processed: 1 succeeded; 0 failed.",
        ),
        (
            Ok(tmp(Some(10.0))),
            Value::Null,
            json!(1),
            Next::WakeAt(now() + chrono::Duration::seconds(10)),
            "Handler 'h' failed temporarily: later",
        ),
        (Ok(tmp(Some(-1.0))), Value::Null, json!(1), Next::WakeAt(now() + chrono::Duration::seconds(60)), "invalid delay"),
        (Ok(tmp(Some(f64::NAN))), Value::Null, json!(1), Next::WakeAt(now() + chrono::Duration::seconds(60)), "invalid delay"),
        (
            Ok(pb::HandleResponse { merge_patch: patch(json!({"status": "x"})), ..success() }),
            Value::Null,
            json!(1),
            Next::WakeAt(now() + chrono::Duration::seconds(60)),
            "sets `status` to \"x\"",
        ),
        (
            Ok(pb::HandleResponse { result: b"{not json".to_vec(), ..success() }),
            Value::Null,
            json!(1),
            Next::WakeAt(now() + chrono::Duration::seconds(60)),
            "invalid JSON in `result`",
        ),
        (
            Err(Answer::Broken("failed with UNKNOWN: Exception calling application: boom".into())),
            Value::Null,
            json!(1),
            Next::WakeAt(now() + chrono::Duration::seconds(60)),
            "failed with an exception. Will retry. failed with UNKNOWN: Exception calling application: boom",
        ),
        (
            Err(Answer::Broken("did not answer in 3s".into())),
            Value::Null,
            json!(1),
            Next::WakeAt(now() + chrono::Duration::seconds(60)),
            "did not answer in 3s",
        ),
        (Err(Answer::Unreachable("refused".into())), Value::Null, Value::Null, Next::Throttled(None), "could not be called"),
    ];
    for (reply, result, retries, next, line) in cases {
        let mut cycle = handle(&world, &b);
        let inv = cycle.next_call().expect("h is due");
        cycle.absorb(&world.subject(), &b, &inv, reply.clone());
        assert_eq!(cycle.next_call(), None, "one attempt per cycle");
        let (writes, got_next) = cycle.conclude(&world.subject(), &b, None);
        assert_eq!(got_next, next, "{reply:?}");
        assert_eq!(writes.status["status"]["h"], result, "{reply:?}");
        assert_eq!(writes.status["status"]["bosun.dev"]["progress"]["h"]["retries"], retries, "{reply:?}: {}", writes.status);
        let lines: Vec<String> = cycle.take_lines().into_iter().map(|l| l.text).collect();
        assert!(lines.iter().any(|l| l.contains(line)), "{reply:?}: {lines:?}");
    }
}

#[test]
fn the_main_write_and_the_status_write_carry_patches_results_state_and_the_finalizer() {
    let world = World::new(&[("c", pb::HandlerKind::Create), ("d", pb::HandlerKind::Delete)]);
    let b = body(json!({"a": 1}), true, false, None, json!({}));
    let mut cycle = handle(&world, &b);
    let inv = cycle.next_call().unwrap();
    let answer = pb::HandleResponse {
        result: b"{\"ok\":true}".to_vec(),
        merge_patch: serde_json::to_vec(&json!({"metadata": {"labels": {"x": "1"}}, "status": {"phase": "Up"}})).unwrap(),
        ..success()
    };
    cycle.absorb(&world.subject(), &b, &inv, Ok(answer));
    let (writes, next) = cycle.conclude(&world.subject(), &b, None);
    assert_eq!(next, Next::Idle);
    assert_eq!(writes.finalizer, None, "already on");
    // The diffbase goes last, in a write of its own (after the status write, which records
    // the success only after the handler's patch landed).
    assert_eq!(writes.main, json!({"metadata": {"labels": {"x": "1"}, "annotations": {"bosun.dev/kopf-managed": "yes"}}}));
    assert_eq!(writes.last, json!({"metadata": {"annotations": {DIFFBASE_KEY: "{\"spec\":{\"a\":1}}\n"}}}));
    assert_eq!(writes.status, json!({"status": {"phase": "Up", "c": {"ok": true}}}));
}

/// The writes a cycle makes: the main write, the status write, in that order ("-" for none).
fn writes_made(w: &Writes) -> String {
    let main = !w.main.as_object().unwrap().is_empty() || !w.last.as_object().unwrap().is_empty() || w.finalizer.is_some();
    let status = !w.status.as_object().unwrap().is_empty();
    match (main, status) {
        (true, true) => "main+status".into(),
        (true, false) => "main".into(),
        (false, true) => "status".into(),
        (false, false) => "-".into(),
    }
}

#[test]
fn a_cycle_writes_once_unless_it_stores_the_diffbase_and_writes_status_too() {
    use pb::HandlerKind as K;
    let tmp = || pb::HandleResponse {
        outcome: pb::Outcome::TemporaryError as i32,
        message: "later".into(),
        delay_seconds: Some(1.0),
        ..Default::default()
    };
    let with_result = || pb::HandleResponse { result: b"{\"ok\":true}".to_vec(), ..success() };
    let retried = json!({"c": {"purpose": "create", "retries": 1, "started": "2026-01-01T00:00:00.000000+00:00"}});
    let handled = Some(json!({"spec": {"a": 1}}));
    // (handler kind, the diffbase in status, stored diffbase, progress, answer) → writes
    type Row<'a> = (K, bool, Option<Value>, Value, pb::HandleResponse, &'a str);
    let rows: Vec<Row> = vec![
        // Finished without a result: the diffbase alone, in the main write.
        (K::Create, false, None, json!({}), success(), "main"),
        // A result too: it goes to status, the diffbase to its annotation.
        (K::Create, false, None, json!({}), with_result(), "main+status"),
        // A retry's progress: status only, as before.
        (K::Create, false, None, json!({}), tmp(), "status"),
        // The last retry: the result and the purge of progress in status, the diffbase in main.
        (K::Create, false, None, retried.clone(), with_result(), "main+status"),
        (K::Create, false, None, retried.clone(), success(), "main+status"),
        // Resuming changes no diffbase: nothing to write without a result.
        (K::Resume, false, handled.clone(), json!({}), success(), "-"),
        (K::Resume, false, handled.clone(), json!({}), with_result(), "status"),
        // `--diffbase-storage status` (Kopf's StatusDiffBaseStorage): one write.
        (K::Create, true, None, json!({}), with_result(), "status"),
        (K::Create, true, None, json!({}), success(), "status"),
        (K::Create, true, None, retried, with_result(), "status"),
    ];
    for (kind, in_status, diffbase, progress, answer, want) in rows {
        let mut world = World::new(&[("c", kind)]);
        if in_status {
            world.storage.diffbase_kind = StorageKind::Status;
        }
        let b = body(json!({"a": 1}), false, false, diffbase.clone(), progress.clone());
        let mut cycle = match begin(&world.subject(), &b, None, true, now()) {
            Start::Handle(c) => c,
            other => panic!("{kind:?}: expected handlers to call, got {}", start_of(&other)),
        };
        let inv = cycle.next_call().unwrap();
        cycle.absorb(&world.subject(), &b, &inv, Ok(answer.clone()));
        let (writes, _) = cycle.conclude(&world.subject(), &b, None);
        assert_eq!(
            writes_made(&writes),
            want,
            "{kind:?}, diffbase in status {in_status}, {diffbase:?}, {progress}, {answer:?}: {} {}",
            writes.main,
            writes.status
        );
    }
}

#[test]
fn an_object_handled_before_the_diffbase_moved_continues_and_its_diffbase_moves_with_the_next_write() {
    use pb::HandlerKind as K;
    let world = World::new(&[("c", K::Create), ("u", K::Update)]);
    // Bosun's older builds: the diffbase in status.
    let mut old = body(json!({"a": 1}), false, false, None, json!({}));
    old["status"]["bosun.dev"] = json!({"last-handled-configuration": "{\"spec\":{\"a\":1}}\n"});
    assert_eq!(start_of(&begin(&world.subject(), &old, None, false, now())), "idle", "handled: nothing to do");
    // Changed: an update with the diff against the old place's diffbase; the new one goes to
    // its annotation, and the copy in status follows it (the status write goes first: should
    // the annotation's write fail, the copy still says the update is handled); it goes with a
    // write made once the annotation holds it.
    old["spec"]["a"] = json!(2);
    let mut cycle = handle(&world, &old);
    assert_eq!(cycle.diff.len(), 1, "{:?}", cycle.diff);
    let inv = cycle.next_call().unwrap();
    cycle.absorb(&world.subject(), &old, &inv, Ok(success()));
    let (writes, _) = cycle.conclude(&world.subject(), &old, None);
    assert_eq!(diffbase_in(&writes.last), &json!("{\"spec\":{\"a\":2}}\n"));
    assert_eq!(writes.status, json!({"status": {"bosun.dev": {"last-handled-configuration": "{\"spec\":{\"a\":2}}\n"}}}));
}

#[test]
fn a_patch_over_the_controllers_own_state_is_not_applied_and_is_said() {
    // The diffbase in status (`--diffbase-storage status`), so the state goes where the patch does.
    let mut world = World::new(&[("c", pb::HandlerKind::Create)]);
    world.storage.diffbase_kind = StorageKind::Status;
    let b = body(json!({"a": 1}), false, false, None, json!({}));
    let mut cycle = handle(&world, &b);
    let inv = cycle.next_call().unwrap();
    let answer = pb::HandleResponse { merge_patch: serde_json::to_vec(&json!({"status": {"bosun.dev": "mine"}})).unwrap(), ..success() };
    cycle.absorb(&world.subject(), &b, &inv, Ok(answer));
    let (writes, _) = cycle.conclude(&world.subject(), &b, None);
    assert_eq!(writes.status["status"]["bosun.dev"]["last-handled-configuration"], json!("{\"spec\":{\"a\":1}}\n"), "{}", writes.status);
    let lines = cycle.take_lines();
    let warning = lines.iter().find(|l| l.level == Level::Warn).expect("a warning");
    assert!(warning.text.starts_with("The patch of handler(s) 'c' replaces where the controller keeps its state"), "{}", warning.text);
}

#[test]
fn a_finished_deletion_releases_the_finalizer_unless_a_daemon_still_winds_down() {
    let world = World::new(&[("d", pb::HandlerKind::Delete)]);
    let b = body(json!({}), true, true, Some(json!({"spec": {}})), json!({}));
    let later = now() + chrono::Duration::seconds(30);
    const PROCESSED: &str = "Deletion is processed: 1 succeeded; 0 failed.";
    let released = |cycle: &mut Cycle, b: &Value| {
        let (writes, next) = cycle.conclude(&world.subject(), b, None);
        assert_eq!((writes.finalizer, next), (Some(false), Next::Idle));
        assert!(writes.status.as_object().unwrap().is_empty(), "no state written on an object about to go: {}", writes.status);
        assert!(cycle.take_lines().iter().any(|l| l.text == PROCESSED));
    };

    let mut cycle = handle(&world, &b);
    let inv = cycle.next_call().unwrap();
    cycle.absorb(&world.subject(), &b, &inv, Ok(success()));
    released(&mut cycle, &b);

    // Held: the finalizer stays, and so does the delete handler's record, so that the cycle
    // after the daemon's end does not call it again; it is processed only then.
    let mut cycle = handle(&world, &b);
    let inv = cycle.next_call().unwrap();
    cycle.absorb(&world.subject(), &b, &inv, Ok(success()));
    let (writes, next) = cycle.conclude(&world.subject(), &b, Some(later));
    assert_eq!((writes.finalizer, next), (None, Next::WakeAt(later)));
    assert_eq!(writes.status["status"]["bosun.dev"]["progress"]["d"]["success"], json!(true), "{}", writes.status);
    assert!(!cycle.take_lines().iter().any(|l| l.text == PROCESSED));
    let mut held = b.clone();
    json_patch::merge(&mut held, &writes.status);
    let mut cycle = handle(&world, &held);
    assert_eq!(cycle.next_call(), None, "the delete handler is not called again");
    released(&mut cycle, &held);
}

#[test]
fn refused_patches_fail_only_their_handler_and_the_state_is_still_written() {
    let world = World::new(&[("good", pb::HandlerKind::Create), ("bad", pb::HandlerKind::Create)]);
    let mut b = body(json!({}), false, false, None, json!({}));
    // One handler per cycle: `good`'s outcome (and patch) is written before `bad` is called.
    let mut cycles = 0;
    let (writes, next, mut cycle) = loop {
        cycles += 1;
        let mut cycle = handle(&world, &b);
        while let Some(inv) = cycle.next_call() {
            let p = json!({"spec": {inv.id.clone(): 1}});
            let answer = pb::HandleResponse { merge_patch: serde_json::to_vec(&p).unwrap(), result: b"1".to_vec(), ..success() };
            cycle.absorb(&world.subject(), &b, &inv, Ok(answer));
        }
        if cycles == 2 {
            cycle.reject(&["bad".to_string()], "422 Invalid");
        }
        let (writes, next) = cycle.conclude(&world.subject(), &b, None);
        if next != Next::Now {
            break (writes, next, cycle);
        }
        json_patch::merge(&mut b, &writes.main);
        json_patch::merge(&mut b, &writes.status);
        json_patch::merge(&mut b, &writes.last);
    };
    assert_eq!((cycles, next), (2, Next::Idle));
    assert_eq!(b["spec"], json!({"good": 1}), "good's patch, written by the first cycle");
    assert!(writes.main.get("spec").is_none(), "bad's patch is not written: {}", writes.main);
    assert_eq!(b["status"]["good"], json!(1));
    // Its result is taken back, in case the status write stored it before the main write was
    // refused.
    assert_eq!(writes.status["status"].get("bad"), Some(&Value::Null), "{}", writes.status);
    assert!(diffbase_in(&writes.last).is_string(), "the cause is processed: {}", writes.main);
    let lines: Vec<String> = cycle.take_lines().into_iter().map(|l| l.text).collect();
    assert!(
        lines.contains(&"Handler 'bad' failed permanently: its patch was rejected by the API server: 422 Invalid".to_string()),
        "{lines:?}"
    );
    assert!(lines.contains(&"Creation is processed: 1 succeeded; 1 failed.".to_string()), "{lines:?}");
}

#[test]
fn an_essence_too_large_to_store_is_kept_as_a_digest_and_still_detects_changes() {
    let world = World::new(&[("c", pb::HandlerKind::Create), ("u", pb::HandlerKind::Update)]);
    let big = json!({"blob": "\"".repeat(STATUS_DIFFBASE_LIMIT)});
    let b = body(big.clone(), false, false, None, json!({}));
    let mut cycle = handle(&world, &b);
    let inv = cycle.next_call().unwrap();
    cycle.absorb(&world.subject(), &b, &inv, Ok(success()));
    let (writes, _) = cycle.conclude(&world.subject(), &b, None);
    let stored = diffbase_in(&writes.last).as_str().unwrap().to_string();
    assert!(stored.starts_with("digest:") && stored.len() < 100, "{stored}");
    assert!(writes.events.iter().any(|e| e.reason == "DiffbaseTooLarge"));
    // Stored as a digest: the same body is nothing to do, a changed one is an update.
    let mut handled = b.clone();
    handled["metadata"]["annotations"] = json!({DIFFBASE_KEY: stored});
    assert_eq!(start_of(&begin(&world.subject(), &handled, None, false, now())), "idle");
    handled["spec"]["blob"] = json!("small now");
    assert_eq!(start_of(&begin(&world.subject(), &handled, None, false, now())), "update:u");
}
