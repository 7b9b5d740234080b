//! Table tests of a worker's decisions: which body it handles and which it skips as an echo,
//! when it wakes, goes on at once or retires, and its throttling.

use super::*;
use serde_json::json;

fn body(rv: &str) -> Value {
    json!({"metadata": {"uid": "u1", "name": "n", "namespace": "ns", "resourceVersion": rv}})
}

fn deleting(rv: &str) -> Value {
    let mut b = body(rv);
    b["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    b
}

fn up(rv: &str) -> Seen {
    Seen::Upsert(body(rv))
}

#[test]
fn an_echo_or_older_is_skipped_and_our_own_body_is_handled_after_a_gain() {
    let cases = [
        (Some("5"), Some("7"), false, true),
        (Some("5"), Some("7"), true, true),
        (Some("7"), Some("7"), false, true),
        (Some("7"), Some("7"), true, false),
        (Some("8"), Some("7"), false, false),
        (Some("8"), Some("7"), true, false),
        (Some("9"), Some("10"), false, true),
        (Some("7"), None, false, false),
        (None, Some("7"), false, false),
        // Versions that are not comparable: the echo is known by equality alone.
        (Some("MTIz"), Some("MTIz"), false, true),
        (Some("MTIz"), Some("MTIz"), true, false),
        (Some("MTIy"), Some("MTIz"), false, false),
    ];
    for (rv, written, regained, want) in cases {
        assert_eq!(is_echo(rv, written, regained), want, "{rv:?} {written:?} {regained}");
    }
}

#[test]
fn throttling_follows_fibonacci_up_to_610_seconds() {
    let cases = [(1, 1), (2, 1), (3, 2), (4, 3), (5, 5), (9, 34), (15, 610), (40, 610)];
    for (failures, secs) in cases {
        assert_eq!(throttle_delay(failures), Duration::from_secs(secs), "{failures}");
    }
}

#[test]
fn the_newest_body_is_kept_and_a_deletion_always_wins() {
    let at = |rv: &str| json!({"metadata": {"resourceVersion": rv}});
    let up = |rv: &str| Seen::Upsert(at(rv));
    let cases: [(Option<Seen>, Seen, &str); 8] = [
        (None, up("5"), "5"),
        (Some(up("5")), up("7"), "7"),
        (Some(up("7")), up("5"), "7"),
        (Some(up("7")), up("7"), "7"),
        (Some(up("9")), up("10"), "10"),
        (Some(up("7")), Seen::Deleted(at("6")), "6"),
        (Some(up("7")), Seen::Upsert(json!({"metadata": {}})), ""),
        // Not comparable: the last to arrive.
        (Some(up("b")), up("a"), "a"),
    ];
    for (have, incoming, want) in cases {
        let mut latest = have;
        keep_newest(&mut latest, incoming);
        let got = latest.as_ref().and_then(|l| l.body()["metadata"]["resourceVersion"].as_str()).unwrap_or("");
        assert_eq!(got, want);
    }
}

#[tokio::test(start_paused = true)]
async fn a_completed_deletion_makes_bodies_at_or_before_it_stale_for_five_minutes() {
    let now = Instant::now();
    let mut finished = Finished::default();
    finished.note("u1", Some("7"), now);
    finished.note("u2", None, now); // no version, nothing to compare: not remembered
    let cases = [
        ("u1", Some("6"), true),
        ("u1", Some("7"), true),
        ("u1", Some("8"), false),
        ("u1", None, false),
        ("u2", Some("1"), false),
        ("u3", Some("1"), false),
    ];
    for (uid, rv, want) in cases {
        assert_eq!(finished.is_stale(uid, rv), want, "{uid} {rv:?}");
    }
    // Forgotten once another is noted after FINISHED_FOR.
    finished.note("u9", Some("1"), now + FINISHED_FOR);
    assert!(!finished.is_stale("u1", Some("6")));
    // Opaque versions: equal is stale, anything else is not known to be.
    finished.note("u4", Some("MTIz"), now);
    assert!(finished.is_stale("u4", Some("MTIz")));
    assert!(!finished.is_stale("u4", Some("MTIy")));
}

#[test]
fn a_completed_deletion_is_a_deleting_body_without_our_finalizer() {
    let cases = [(deleting("7"), false, Some(("u1", Some("7")))), (deleting("7"), true, None), (body("7"), false, None)];
    for (written, has_finalizer, want) in cases {
        assert_eq!(completed_deletion(&written, has_finalizer), want, "{written} {has_finalizer}");
    }
}

/// One step of a worker's life and what it must decide.
enum Step {
    /// An event posted (or none), woken by it (`false`) or by a timer (`true`), with the
    /// authority's gains: the version handled, if any.
    Event(Option<Seen>, bool, u64, Option<&'static str>),
    /// A cycle ended: its written body, what next, stopped daemons still winding, events
    /// posted meanwhile, gains; the worker's next move, whether it goes on at once, and its
    /// wake-up in seconds from now.
    End(Option<Value>, Next, bool, bool, u64, AfterCycle, bool, Option<u64>),
    Woken(Woken),
    Revival(Option<u64>),
    Lost,
    /// How long it stays idle (seconds), if it may go now; whether it is throttled.
    Idle(Option<u64>, bool),
}

#[tokio::test(start_paused = true)]
async fn a_worker_handles_what_is_new_skips_its_own_echoes_and_wakes_when_it_should() {
    use AfterCycle::{Carry, Retire};
    use Step::*;
    let now = Instant::now();
    let in_secs = |s: u64| DateTime::<Utc>::from_timestamp(s as i64, 0).unwrap();
    let at = |t: DateTime<Utc>| now + Duration::from_secs(t.timestamp() as u64);
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "a new object is handled; idle after, its body dropped",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(None, Next::Idle, false, false, 0, Carry, false, None),
                Idle(Some(0), false),
                Event(None, true, 0, None),
            ],
        ),
        (
            "the echo of our write and older events are skipped; a newer one is handled",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(body("7")), Next::Idle, false, false, 0, Carry, false, None),
                Idle(Some(30), false),
                Event(Some(up("6")), false, 0, None),
                Event(Some(up("7")), false, 0, None),
                Event(Some(up("8")), false, 0, Some("8")),
            ],
        ),
        (
            "after its write it stays its while even once the echo came: a listing taken before the write may still bring an older body",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(body("7")), Next::Idle, false, false, 0, Carry, false, None),
                Event(Some(up("7")), false, 0, None),
                Idle(Some(30), false),
                Event(Some(Seen::Listed(body("5"))), false, 0, None),
            ],
        ),
        (
            "after a gain the body of our own write is handled again",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(body("7")), Next::Idle, false, false, 0, Carry, false, None),
                Event(Some(up("7")), false, 1, Some("7")),
            ],
        ),
        (
            "a deletion is always handled, even older than our write",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(body("7")), Next::Idle, false, false, 0, Carry, false, None),
                Event(Some(Seen::Deleted(body("6"))), false, 0, Some("6")),
            ],
        ),
        (
            "the finalizer just added: it goes on at once with the written body",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(body("6")), Next::Now, false, false, 0, Carry, true, None),
                Event(None, true, 0, Some("6")),
            ],
        ),
        (
            "a retry wakes at its time with the newest body, the echo kept for it",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(body("7")), Next::WakeAt(in_secs(60)), false, false, 0, Carry, false, Some(60)),
                Idle(None, false),
                Event(Some(up("7")), false, 0, None),
                Woken(super::Woken::Timer),
                Event(None, true, 0, Some("7")),
            ],
        ),
        (
            "events that came during a cycle that wrote: looked at again at once",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(body("7")), Next::WakeAt(in_secs(60)), false, true, 0, Carry, true, None),
                Event(None, true, 0, Some("7")),
            ],
        ),
        (
            "a deletion requested during the cycle, seen in the written body: handled at once",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(deleting("7")), Next::Idle, false, false, 0, Carry, true, None),
                Event(None, true, 0, Some("7")),
            ],
        ),
        (
            "throttled: Fibonacci backoff, or earlier when asked; reset by a success",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(None, Next::Throttled(None), false, false, 0, Carry, false, Some(1)),
                Idle(None, true),
                Woken(super::Woken::Timer),
                Event(None, true, 0, Some("5")),
                End(None, Next::Throttled(None), false, false, 0, Carry, false, Some(1)),
                Woken(super::Woken::Timer),
                Event(None, true, 0, Some("5")),
                End(None, Next::Throttled(None), false, false, 0, Carry, false, Some(2)),
                Woken(super::Woken::Timer),
                Event(None, true, 0, Some("5")),
                End(None, Next::Throttled(Some(in_secs(1))), false, false, 0, Carry, false, Some(1)),
                Woken(super::Woken::Timer),
                Event(None, true, 0, Some("5")),
                End(None, Next::Idle, false, false, 0, Carry, false, None),
                Idle(Some(0), false),
            ],
        ),
        (
            "a revival of its server wakes a throttled object in its turn; another's does not",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(None, Next::Throttled(None), false, false, 0, Carry, false, Some(1)),
                Revival(None),
                Idle(None, true),
                Revival(Some(0)),
                Idle(None, false),
            ],
        ),
        (
            "stopped daemons winding: the body is kept and their end wakes it",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(None, Next::Idle, true, false, 0, Carry, false, None),
                Idle(None, false),
                Woken(super::Woken::Wound),
                Idle(Some(0), false),
                Event(None, true, 0, Some("5")),
            ],
        ),
        (
            "gone: it retires, and events from before are skipped as older than its last write",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(deleting("9")), Next::Gone, false, false, 0, Retire, false, None),
                Event(Some(up("8")), false, 0, None),
                Event(Some(up("12")), false, 0, Some("12")),
            ],
        ),
        (
            "lost: it forgets the object, and handles what comes when it is ours again",
            vec![
                Event(Some(up("5")), false, 0, Some("5")),
                End(Some(body("7")), Next::WakeAt(in_secs(60)), false, false, 0, Carry, false, Some(60)),
                Lost,
                Idle(Some(0), false),
                Event(Some(up("7")), false, 0, Some("7")),
            ],
        ),
    ];
    for (name, steps) in cases {
        let mut state = WorkerState::default();
        let mut ran: Option<Seen> = None;
        for (i, step) in steps.into_iter().enumerate() {
            let here = format!("{name}, step {i}");
            match step {
                Event(pending, woke, gains, want) => {
                    let got = state.on_event(pending, woke, gains, &Finished::default());
                    assert_eq!(got.as_ref().and_then(|s| object::version(s.body())), want, "{here}");
                    ran = got.or(ran);
                }
                End(written, next, winding, posted_meanwhile, gains, want, again, wake) => {
                    let released = winding.then(Arc::default);
                    let ended = Ended { ran: ran.take().expect("a cycle ran"), written, next, released, posted_meanwhile, gains };
                    assert_eq!(state.on_cycle_end(ended, now, at), want, "{here}");
                    assert_eq!(state.goes_on(), again, "{here}: goes on at once");
                    if again {
                        state.again = true; // asked once above; the worker asks it next
                    }
                    assert_eq!(state.wake(), wake.map(|s| now + Duration::from_secs(s)), "{here}: wake-up");
                }
                Woken(w) => state.on_woken(w),
                Revival(after) => state.on_revival(after.map(Duration::from_secs), now),
                Lost => state.on_lost(),
                Idle(idle, throttled) => {
                    assert_eq!(state.idle_for(Duration::from_secs(30)), idle.map(Duration::from_secs), "{here}: idle");
                    assert_eq!(state.throttled(), throttled, "{here}: throttled");
                }
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_body_stale_after_a_completed_deletion_is_not_handled() {
    let mut finished = Finished::default();
    finished.note("u1", Some("9"), Instant::now());
    let mut state = WorkerState::default();
    assert!(state.on_event(Some(up("8")), false, 0, &finished).is_none());
    assert!(state.on_event(Some(Seen::Deleted(body("8"))), false, 0, &finished).is_some(), "a deletion is handled");
    assert!(state.on_event(Some(up("10")), false, 0, &finished).is_some());
}

/// A retired worker's write whose echo had not come is the next worker's: events from before
/// it are skipped, the echo ends the wait at once (its predecessor waited its while), and an
/// echo that came before retirement leaves nothing behind.
#[tokio::test(start_paused = true)]
async fn a_retired_workers_unechoed_write_is_its_successors() {
    let now = Instant::now();
    let at = |t: DateTime<Utc>| now + Duration::from_secs(t.timestamp().max(0) as u64);
    let wrote = |state: &mut WorkerState| {
        let seen = state.on_event(Some(up("5")), false, 0, &Finished::default()).expect("handled");
        let ended = Ended { ran: seen, written: Some(body("7")), next: Next::Idle, released: None, posted_meanwhile: false, gains: 0 };
        state.on_cycle_end(ended, now, at);
    };
    let mut unechoed = Unechoed::default();
    let mut first = WorkerState::default();
    wrote(&mut first);
    unechoed.keep("u", &first, now);
    let mut next = unechoed.resume("u", now);
    assert_eq!(next.on_event(Some(up("6")), false, 0, &Finished::default()).map(|s| s.body().clone()), None, "older: skipped");
    assert_eq!(next.idle_for(Duration::from_secs(30)), Some(Duration::from_secs(30)), "the echo has not come");
    assert!(next.on_event(Some(up("7")), false, 0, &Finished::default()).is_none(), "the echo: skipped");
    assert_eq!(next.idle_for(Duration::from_secs(30)), Some(Duration::ZERO), "and it may go at once");

    let mut echoed = WorkerState::default();
    wrote(&mut echoed);
    assert!(echoed.on_event(Some(up("7")), false, 0, &Finished::default()).is_none());
    unechoed.keep("v", &echoed, now);
    assert!(unechoed.resume("v", now).on_event(Some(up("6")), false, 0, &Finished::default()).is_some(), "nothing kept for v");

    let mut stale = WorkerState::default();
    wrote(&mut stale);
    unechoed.keep("w", &stale, now);
    let later = now + Duration::from_secs(601);
    assert!(unechoed.resume("w", later).on_event(Some(up("6")), false, 0, &Finished::default()).is_some(), "forgotten after 10 min");
}
