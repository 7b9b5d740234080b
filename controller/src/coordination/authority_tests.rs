//! The authority's verdicts and turns: which objects a member owns, which changes are gains,
//! and how turns hold a handover and end on a revocation.

use std::sync::Arc;

use super::ring::Ring;
use super::*;

fn claims(me: &str, target: &[&str], published: &[&str], others: &[(&str, &[&str])]) -> Ownership {
    Ownership::Shard(Arc::new(Claims {
        me: me.into(),
        target: Ring::new(target),
        published: Ring::new(published),
        others: others.iter().map(|(m, r)| (m.to_string(), Ring::new(*r))).collect(),
    }))
}

/// The uids of 0..n that `ring` gives to `member`.
fn of(ring: &[&str], member: &str, n: usize) -> Vec<String> {
    let ring = Ring::new(ring);
    (0..n).map(|i| format!("uid-{i}")).filter(|u| ring.owner(u) == Some(member)).collect()
}

#[test]
fn a_member_owns_what_both_its_rings_give_it_and_no_other_member_still_claims() {
    let all = 400;
    // b joined: a's share under [a] is everything, under [a, b] about half.
    let a_now = of(&["a", "b"], "a", all);
    let b_now = of(&["a", "b"], "b", all);
    let cases: Vec<(&str, Ownership, &Vec<String>, bool)> = vec![
        // b has published [a, b] but a still claims everything under [a]: b waits.
        ("b waits for a", claims("b", &["a", "b"], &["a", "b"], &[("a", &["a"])]), &b_now, false),
        // a has published [a, b] too: b's share is b's.
        ("b takes over", claims("b", &["a", "b"], &["a", "b"], &[("a", &["a", "b"])]), &b_now, true),
        // b has not published its ring yet: its gains wait for that.
        ("b unannounced", claims("b", &["a", "b"], &[], &[("a", &["a", "b"])]), &b_now, false),
        // a keeps its half at once, before and after publishing.
        ("a keeps", claims("a", &["a", "b"], &["a"], &[("b", &[])]), &a_now, true),
        ("a gives away", claims("a", &["a", "b"], &["a"], &[("b", &[])]), &b_now, false),
    ];
    for (name, ownership, uids, want) in cases {
        assert!(!uids.is_empty(), "{name}");
        for uid in uids {
            assert_eq!(ownership.owns(uid), want, "{name}: {uid}");
        }
    }
}

#[test]
fn gains_are_told_apart_from_losses() {
    let s1 = claims("a", &["a"], &["a"], &[]);
    let s2 = claims("a", &["a", "b"], &["a"], &[]);
    // b publishes its view: a loses b's half (it gave it away already), gains nothing.
    let b_waits = claims("a", &["a", "b"], &["a", "b"], &[("b", &["a"])]);
    let b_claims = claims("a", &["a", "b"], &["a", "b"], &[("b", &["a", "b"])]);
    // b claimed everything, then publishes [a, b]: a's half is a's now.
    let b_claimed_all = claims("a", &["a", "b"], &["a", "b"], &[("b", &["b"])]);
    // c announces it acts for fewer members (it claims more): nothing moves to a.
    let c_view = |view: &'static [&'static str]| claims("a", &["a", "b", "c"], &["a", "b", "c"], &[("b", &["a", "b", "c"]), ("c", view)]);
    let cases = [
        ("lost all", Ownership::All, Ownership::Nothing, false),
        ("led", Ownership::Nothing, Ownership::All, true),
        ("joined", Ownership::Nothing, s1.clone(), true),
        ("leader to shard", Ownership::All, s1.clone(), false),
        ("b joined: a's target shrank", s1.clone(), s2.clone(), false),
        ("b left: a's target grew", s2.clone(), s1.clone(), true),
        ("unchanged", s1.clone(), s1.clone(), false),
        ("shard to leader", s1.clone(), Ownership::All, true),
        ("shard to nothing", s2, Ownership::Nothing, false),
        ("another member's view takes from us", b_waits.clone(), b_claims.clone(), false),
        ("another member's view gives back", b_claims, b_waits, true),
        ("another member stops claiming all", b_claimed_all.clone(), claims("a", &["a", "b"], &["a", "b"], &[("b", &["a", "b"])]), true),
        ("a third member's view that claims more", c_view(&["a", "b", "c"]), c_view(&["b", "c"]), false),
        (
            "a member appears with a view taking nothing",
            claims("a", &["a"], &["a"], &[]),
            claims("a", &["a"], &["a"], &[("x", &["a"])]),
            false,
        ),
        (
            "a member that claimed everything vanishes",
            claims("a", &["a"], &["a"], &[("x", &["x"])]),
            claims("a", &["a"], &["a"], &[]),
            true,
        ),
    ];
    for (name, from, to, want) in cases {
        assert_eq!(from.may_gain(&to), want, "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_turn_of_an_object_given_away_holds_settled_until_it_ends() {
    let authority = Authority::new(Ownership::All);
    let mut changes = authority.subscribe();
    let turn = authority.begin("u1").expect("ours");
    let other = authority.begin("u2").expect("ours");
    assert_eq!(authority.in_flight(), 2);
    authority.set_paused(true);
    assert!(changes.has_changed().unwrap());
    assert_eq!(*changes.borrow_and_update(), Generation { changed: 1, gained: 0 });
    assert!(authority.begin("u3").is_none(), "paused: nothing begins");
    let settled = tokio::spawn({
        let a = authority.clone();
        async move { a.settled().await }
    });
    tokio::task::yield_now().await;
    assert!(!settled.is_finished());
    drop(turn);
    tokio::task::yield_now().await;
    assert!(!settled.is_finished(), "u2 still runs");
    drop(other);
    tokio::time::timeout(std::time::Duration::from_secs(1), settled).await.expect("settled").unwrap();
    authority.set_paused(false);
    assert_eq!(*changes.borrow_and_update(), Generation { changed: 2, gained: 1 });
    assert!(authority.begin("u3").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_revocation_ends_the_turns_begun_before_it_and_not_those_after() {
    let authority = Authority::new(Ownership::All);
    let before = authority.begin("u1").expect("ours");
    assert!(before.is_current());
    authority.revoke();
    tokio::time::timeout(std::time::Duration::from_secs(1), before.revoked()).await.expect("revoked at once");
    assert!(!before.is_current());
    assert_eq!(authority.ownership(), Ownership::Nothing);
    assert!(authority.begin("u1").is_none(), "nothing is ours after a revocation");
    authority.set_ownership(Ownership::All);
    let after = authority.begin("u1").expect("ours again");
    assert!(after.is_current());
    let late = tokio::time::timeout(std::time::Duration::from_secs(1), after.revoked()).await;
    assert!(late.is_err(), "a turn begun after the revocation goes on");
}
