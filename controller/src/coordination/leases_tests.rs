//! Leader election and shards on a paused clock, against Leases kept in memory with the API
//! server's rules that matter here (409 on a stale resourceVersion or an existing name, 404,
//! label selectors): replicas join, are killed (their loop just stops, as with kill -9) or
//! stop gracefully, and at every moment no object is owned by two of them. Faults: a
//! replica's own path to the API stalls (requests neither fail nor answer), wall clocks
//! skewed by ±10 s, turns that outlast a graceful stop.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use http::Method;
use parking_lot::Mutex;
use serde_json::Value;

use super::leader::Candidate;
use super::lease::{GROUP_LABEL, Seat, Timing};
use super::paths_tests::Path;
use super::shards::Member;
use super::{Authority, Ownership};
use crate::clock::Clock;
use crate::cluster::{Api, Error};
use crate::logs::Logger;

#[derive(Default)]
struct FakeLeases {
    leases: Mutex<BTreeMap<String, Value>>,
    rv: Mutex<u64>,
}

impl FakeLeases {
    fn answer(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<Value, Error> {
        let fail =
            |code: u16| Error::Api { method: method.clone(), path: path.into(), code, reason: String::new(), message: String::new() };
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let base = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";
        let name = path.strip_prefix(base).map(|n| n.trim_start_matches('/').to_string()).ok_or_else(|| fail(404))?;
        let mut leases = self.leases.lock();
        let next_rv = || {
            let mut rv = self.rv.lock();
            *rv += 1;
            rv.to_string()
        };
        let body: Value = body.map(|b| serde_json::from_slice(&b).unwrap()).unwrap_or(Value::Null);
        match (method.clone(), name.is_empty()) {
            (Method::GET, true) => {
                let (key, value) = query.strip_prefix("labelSelector=").and_then(|s| s.split_once("%3D")).unwrap_or(("", ""));
                let items: Vec<Value> =
                    leases.values().filter(|l| key.is_empty() || l["metadata"]["labels"][key] == value).cloned().collect();
                Ok(serde_json::json!({"items": items}))
            }
            (Method::GET, false) => leases.get(&name).cloned().ok_or_else(|| fail(404)),
            (Method::POST, true) => {
                let name = body["metadata"]["name"].as_str().unwrap_or("").to_string();
                if leases.contains_key(&name) {
                    return Err(fail(409));
                }
                let mut stored = body;
                stored["metadata"]["resourceVersion"] = next_rv().into();
                leases.insert(name, stored.clone());
                Ok(stored)
            }
            (Method::PUT, false) => {
                let current = leases.get(&name).ok_or_else(|| fail(404))?;
                if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
                    return Err(fail(409));
                }
                let mut stored = body;
                stored["metadata"]["resourceVersion"] = next_rv().into();
                leases.insert(name, stored.clone());
                Ok(stored)
            }
            (Method::DELETE, false) => leases.remove(&name).ok_or_else(|| fail(404)),
            _ => Err(fail(405)),
        }
    }
}

impl Api for FakeLeases {
    fn request<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        _: Option<&'a str>,
        body: Option<Vec<u8>>,
    ) -> BoxFuture<'a, Result<Value, Error>> {
        Box::pin(async move { self.answer(method, path, body) })
    }
}

/// One replica: its authority and the stop of its loop (dropped: killed).
struct Replica {
    authority: Authority,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl Replica {
    fn kill(&mut self) {
        self.task.abort();
        self.stop = None;
    }

    async fn stop_gracefully(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        (&mut self.task).await.unwrap();
    }

    fn alive(&self) -> bool {
        self.stop.is_some()
    }
}

const DURATION: Duration = Duration::from_secs(5);

/// `me` at the Lease (or shard group) `ns/op`.
fn seat(me: &str) -> Seat {
    Seat { name: "op".into(), namespace: "ns".into(), identity: me.into(), timing: Timing::new(DURATION) }
}

async fn candidate(api: &Arc<FakeLeases>, me: &str, clock: Clock) -> Replica {
    candidate_on(api.clone(), me, clock).await
}

async fn candidate_on(api: Arc<dyn Api>, me: &str, clock: Clock) -> Replica {
    let authority = Authority::new(Ownership::Nothing);
    let mut c = Candidate::new(seat(me), api, authority.clone(), Logger::new(None), clock);
    c.look().await;
    let (stop, rx) = tokio::sync::watch::channel(false);
    Replica { authority, stop: Some(stop), task: tokio::spawn(c.run(rx)) }
}

async fn member(api: &Arc<FakeLeases>, me: &str, clock: Clock) -> Replica {
    member_on(api.clone(), me, clock).await
}

async fn member_on(api: Arc<dyn Api>, me: &str, clock: Clock) -> Replica {
    let authority = Authority::new(Ownership::Nothing);
    let mut m = Member::new(seat(me), api, authority.clone(), Logger::new(None), clock);
    m.join().await;
    let (stop, rx) = tokio::sync::watch::channel(false);
    Replica { authority, stop: Some(stop), task: tokio::spawn(m.run(rx)) }
}

/// For each uid, which live replicas own it.
fn owners(replicas: &[Replica], uids: &[String]) -> Vec<Vec<usize>> {
    uids.iter().map(|u| (0..replicas.len()).filter(|&i| replicas[i].alive() && replicas[i].authority.owns(u)).collect()).collect()
}

/// Steps the paused clock by 100 ms until every uid has exactly one owner and every live
/// replica in `busy` owns some, failing if any uid has two owners at any step or `limit`
/// passes; returns the time it took.
async fn settle(replicas: &[Replica], uids: &[String], busy: &[usize], limit: Duration) -> Duration {
    let start = tokio::time::Instant::now();
    loop {
        let o = owners(replicas, uids);
        if let Some((uid, who)) = uids.iter().zip(&o).find(|(_, w)| w.len() > 1) {
            panic!("{uid} is owned by replicas {who:?} at once");
        }
        let working = |i: &usize| o.iter().any(|w| w.contains(i));
        if o.iter().all(|w| w.len() == 1) && busy.iter().all(working) {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "not every object has an owner after {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn until_each_owned_once(replicas: &[Replica], uids: &[String], limit: Duration) -> Duration {
    settle(replicas, uids, &[], limit).await
}

fn uids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("0000{i:04x}-7d9f-4c6b-a5e1-{i:012x}")).collect()
}

#[tokio::test(start_paused = true)]
async fn one_leader_at_a_time_and_a_handover_within_the_lease_after_a_kill_or_a_second_after_a_stop() {
    let api = Arc::new(FakeLeases::default());
    let clock = Clock::tokio();
    let mut replicas = vec![candidate(&api, "a", clock).await, candidate(&api, "b", clock).await, candidate(&api, "c", clock).await];
    let all = ["any-object".to_string()];
    until_each_owned_once(&replicas, &all, Duration::from_secs(1)).await;
    assert_eq!(replicas[0].authority.ownership(), Ownership::All, "the first candidate leads");
    // Killed: nobody may lead before its Lease expires; someone does soon after.
    replicas[0].kill();
    let took = until_each_owned_once(&replicas, &all, DURATION + Duration::from_secs(2)).await;
    assert!(took >= DURATION - Duration::from_secs(1), "taken over after {took:?}, before the Lease expired");
    let leader = (1..3).find(|&i| replicas[i].authority.owns("any-object")).unwrap();
    let transitions = |api: &FakeLeases| api.leases.lock()["op"]["spec"]["leaseTransitions"].as_i64();
    assert_eq!(transitions(&api), Some(1));
    // Stopped gracefully: the Lease is released and taken over within a second or so.
    replicas[leader].stop_gracefully().await;
    let took = until_each_owned_once(&replicas, &all, Duration::from_secs(2)).await;
    assert!(took <= Duration::from_millis(1100), "graceful handover took {took:?}");
    assert_eq!(transitions(&api), Some(2));
}

#[tokio::test(start_paused = true)]
async fn shards_share_the_objects_and_hand_them_over_without_overlap() {
    let api = Arc::new(FakeLeases::default());
    let clock = Clock::tokio();
    let objects = uids(600);
    let mut replicas = vec![member(&api, "a", clock).await];
    until_each_owned_once(&replicas, &objects, Duration::from_secs(1)).await;
    for me in ["b", "c"] {
        replicas.push(member(&api, me, clock).await);
        let busy: Vec<usize> = (0..replicas.len()).collect();
        let took = settle(&replicas, &objects, &busy, Duration::from_secs(5)).await;
        assert!(took <= Duration::from_secs(3), "{me} joined in {took:?}");
    }
    let shares: Vec<usize> = (0..3).map(|i| objects.iter().filter(|u| replicas[i].authority.owns(u)).count()).collect();
    assert!(shares.iter().all(|&n| (140..=260).contains(&n)), "uneven: {shares:?}");
    assert_eq!(api.leases.lock().values().filter(|l| l["metadata"]["labels"][GROUP_LABEL] == "op").count(), 3);

    // A cycle in flight at the member that gives an object away holds the handover.
    let moving = objects.iter().find(|u| replicas[0].authority.owns(u)).unwrap().clone();
    let turn = replicas[0].authority.begin(&moving).unwrap();
    replicas[1].kill(); // b's objects move; a keeps `moving` meanwhile
    until_each_owned_once(&replicas, &objects, DURATION + Duration::from_secs(2)).await;
    // a leaves gracefully: it owns nothing at once, but keeps its Lease (so its objects stay
    // claimed) until its cycle of `moving` has ended; then c takes everything.
    let _ = replicas[0].stop.take().unwrap().send(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!replicas[0].authority.owns(&moving));
    assert!(!replicas[2].authority.owns(&moving), "c must not begin while a's cycle runs");
    drop(turn);
    (&mut replicas[0].task).await.unwrap();
    let took = until_each_owned_once(&replicas, &objects, Duration::from_secs(3)).await;
    assert!(took <= Duration::from_secs(2), "graceful leave took {took:?}");
    assert!(objects.iter().all(|u| replicas[2].authority.owns(u)), "c is alone and owns everything");
    assert_eq!(api.leases.lock().len(), 2, "a deleted its Lease; b's expired one stays until it is old");
}

#[tokio::test(start_paused = true)]
async fn a_member_that_gives_objects_away_announces_it_only_after_their_cycles_end() {
    let api = Arc::new(FakeLeases::default());
    let clock = Clock::tokio();
    let objects = uids(300);
    let mut replicas = vec![member(&api, "a", clock).await];
    until_each_owned_once(&replicas, &objects, Duration::from_secs(1)).await;
    // a handles everything; one of the objects b will get is in a cycle at a.
    let ring = super::ring::Ring::new(["a", "b"]);
    let moving = objects.iter().find(|u| ring.owner(u) == Some("b")).unwrap().clone();
    let turn = replicas[0].authority.begin(&moving).unwrap();
    replicas.push(member(&api, "b", clock).await);
    settle(&replicas, &objects[..0], &[], Duration::from_secs(1)).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let o = owners(&replicas, &objects);
    let idx = objects.iter().position(|u| *u == moving).unwrap();
    assert!(o[idx].is_empty(), "while a's cycle runs, neither begins another: {:?}", o[idx]);
    assert!(!replicas[1].authority.owns(&moving));
    // a keeps its half meanwhile; b's half waits with `moving` (a announces its new members
    // once everything it gave away has settled).
    for (uid, who) in objects.iter().zip(&o) {
        let want: &[usize] = if ring.owner(uid) == Some("a") { &[0] } else { &[] };
        assert_eq!(who.as_slice(), want, "{uid}");
    }
    drop(turn);
    until_each_owned_once(&replicas, &objects, Duration::from_secs(3)).await;
    assert!(replicas[1].authority.owns(&moving));
}

/// A clock `skew` seconds off the others'.
fn skewed(skew: i64) -> Clock {
    Clock::Tokio { utc: chrono::Utc::now() + chrono::Duration::seconds(skew), at: tokio::time::Instant::now() }
}

/// Steps the paused clock by 100 ms for `how_long`, failing if any uid is owned by two
/// replicas at any step.
async fn never_two_owners(replicas: &[Replica], uids: &[String], how_long: Duration) {
    let start = tokio::time::Instant::now();
    while start.elapsed() < how_long {
        let o = owners(replicas, uids);
        if let Some((uid, who)) = uids.iter().zip(&o).find(|(_, w)| w.len() > 1) {
            panic!("{uid} is owned by replicas {who:?} at once, {:?} in", start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (on the paused clock) until the turn is told to end; returns how long it took.
async fn revoked_within(turn: &super::Turn, limit: Duration) -> Duration {
    let start = tokio::time::Instant::now();
    tokio::time::timeout(limit, turn.revoked()).await.unwrap_or_else(|_| panic!("the turn is still current after {limit:?}"));
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_api_path_stalls_stops_handling_at_its_renew_deadline_before_another_takes_over() {
    let api = Arc::new(FakeLeases::default());
    let clock = Clock::tokio();
    let path = Path::new(api.clone());
    let replicas = vec![candidate_on(path.clone(), "a", clock).await, candidate(&api, "b", clock).await];
    let all = ["any-object".to_string()];
    until_each_owned_once(&replicas, &all, Duration::from_secs(1)).await;
    assert_eq!(replicas[0].authority.ownership(), Ownership::All);
    let turn = replicas[0].authority.begin("any-object").expect("a leads");
    // Just after a renewal: the renew deadline counts from when it was sent.
    tokio::time::sleep(Duration::from_millis(50)).await;
    path.stall(true);
    let took = revoked_within(&turn, DURATION).await;
    assert!(took <= Timing::new(DURATION).renew_deadline, "revoked {took:?} after the stall");
    assert_eq!(replicas[0].authority.ownership(), Ownership::Nothing);
    drop(turn);
    // b takes over a lease duration after it saw the last renewal, never while a handles.
    let took = until_each_owned_once(&replicas, &all, DURATION + Duration::from_secs(2)).await;
    assert!(replicas[1].authority.owns("any-object"), "b leads after {took:?}");
    never_two_owners(&replicas, &all, Duration::from_secs(10)).await;
}

/// Shard members a (through its own path to the API, returned) and b sharing 200 objects.
async fn a_on_its_own_path_and_b() -> (Arc<Path>, Vec<String>, Vec<Replica>) {
    let api = Arc::new(FakeLeases::default());
    let clock = Clock::tokio();
    let objects = uids(200);
    let path = Path::new(api.clone());
    let mut replicas = vec![member_on(path.clone(), "a", clock).await];
    until_each_owned_once(&replicas, &objects, Duration::from_secs(1)).await;
    replicas.push(member(&api, "b", clock).await);
    settle(&replicas, &objects, &[0, 1], Duration::from_secs(5)).await;
    (path, objects, replicas)
}

#[tokio::test(start_paused = true)]
async fn a_shard_member_whose_api_path_stalls_stops_handling_at_its_renew_deadline() {
    let (path, objects, replicas) = a_on_its_own_path_and_b().await;
    let mine = objects.iter().find(|u| replicas[0].authority.owns(u)).unwrap().clone();
    let turn = replicas[0].authority.begin(&mine).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    path.stall(true);
    let took = revoked_within(&turn, DURATION).await;
    assert!(took <= Timing::new(DURATION).renew_deadline, "revoked {took:?} after the stall");
    drop(turn);
    let took = settle(&replicas, &objects, &[1], DURATION + Duration::from_secs(3)).await;
    assert!(objects.iter().all(|u| replicas[1].authority.owns(u)), "b took everything over after {took:?}");
    never_two_owners(&replicas, &objects, Duration::from_secs(10)).await;
}

/// A member whose write announcing new members fails (refused, or its answer lost) must not
/// act on them: b is killed, a sees its Lease expire and means to take everything, but the
/// Lease write that would announce it is refused; until that write succeeds, a handles only
/// what its Lease announces (its own half), never b's, which b's published view still gives b.
#[tokio::test(start_paused = true)]
async fn a_member_acts_only_on_the_members_its_lease_announces_not_on_a_write_that_failed() {
    let (path, objects, mut replicas) = a_on_its_own_path_and_b().await;
    let bs: Vec<String> = objects.iter().filter(|u| replicas[1].authority.owns(u)).cloned().collect();
    let alone = serde_json::to_string(&["a"]).unwrap();
    path.refuse(move |_, body| body["metadata"]["annotations"][super::lease::VIEW_ANNOTATION] == alone.as_str());
    replicas[1].kill();
    let start = tokio::time::Instant::now();
    while start.elapsed() < DURATION * 3 {
        let taken: Vec<&String> = bs.iter().filter(|u| replicas[0].authority.owns(u)).collect();
        assert!(taken.is_empty(), "a owns {} of b's objects {:?} after b's kill, unannounced", taken.len(), start.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    *path.refuse.lock() = None;
    let took = settle(&replicas, &objects, &[0], DURATION).await;
    assert!(objects.iter().all(|u| replicas[0].authority.owns(u)), "a took everything once announced, after {took:?}");
}

#[tokio::test(start_paused = true)]
async fn candidates_with_wall_clocks_twenty_seconds_apart_never_both_lead() {
    let api = Arc::new(FakeLeases::default());
    let replicas = vec![candidate(&api, "a", skewed(-10)).await, candidate(&api, "b", skewed(10)).await];
    let all = ["any-object".to_string()];
    assert!(replicas[0].authority.owns("any-object"), "a came first");
    never_two_owners(&replicas, &all, Duration::from_secs(30)).await;
    assert!(replicas[0].authority.owns("any-object"), "a still leads: it renews");
}

#[tokio::test(start_paused = true)]
async fn shard_members_with_wall_clocks_twenty_seconds_apart_never_share_an_object() {
    let api = Arc::new(FakeLeases::default());
    let objects = uids(200);
    let mut replicas = vec![member(&api, "a", skewed(-10)).await];
    until_each_owned_once(&replicas, &objects, Duration::from_secs(1)).await;
    replicas.push(member(&api, "b", skewed(10)).await);
    settle(&replicas, &objects, &[0, 1], Duration::from_secs(5)).await;
    never_two_owners(&replicas, &objects, Duration::from_secs(30)).await;
    assert_eq!(api.leases.lock().len(), 2, "nobody deleted a live member's Lease as expired");
}

#[tokio::test(start_paused = true)]
async fn a_stopping_leader_keeps_its_lease_while_its_turns_run_and_ends_them_before_it_passes() {
    let api = Arc::new(FakeLeases::default());
    let clock = Clock::tokio();
    let mut replicas = vec![candidate(&api, "a", clock).await, candidate(&api, "b", clock).await];
    let all = ["any-object".to_string()];
    until_each_owned_once(&replicas, &all, Duration::from_secs(1)).await;
    let turn = replicas[0].authority.begin("any-object").unwrap();
    let _ = replicas[0].stop.take().unwrap().send(true);
    // The turn outlasts the lease duration: b must not lead while it runs; a revokes it.
    let b = replicas[1].authority.clone();
    let watcher = tokio::spawn(async move {
        loop {
            assert!(!b.owns("any-object"), "b leads while a's turn still runs");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let took = revoked_within(&turn, DURATION * 2).await;
    assert!(took >= DURATION - Duration::from_millis(200), "revoked after {took:?}, before a lease duration");
    assert!(!watcher.is_finished(), "b never led meanwhile");
    watcher.abort();
    drop(turn);
    (&mut replicas[0].task).await.unwrap();
    let took = until_each_owned_once(&replicas, &all, Duration::from_secs(2)).await;
    assert!(replicas[1].authority.owns("any-object"), "released, b leads within {took:?}");
}

#[tokio::test(start_paused = true)]
async fn a_leaving_member_keeps_its_lease_while_its_turns_run_past_the_lease_duration() {
    let api = Arc::new(FakeLeases::default());
    let clock = Clock::tokio();
    let objects = uids(200);
    let mut replicas = vec![member(&api, "a", clock).await];
    until_each_owned_once(&replicas, &objects, Duration::from_secs(1)).await;
    replicas.push(member(&api, "b", clock).await);
    settle(&replicas, &objects, &[0, 1], Duration::from_secs(5)).await;
    let moving = objects.iter().find(|u| replicas[0].authority.owns(u)).unwrap().clone();
    let turn = replicas[0].authority.begin(&moving).unwrap();
    let _ = replicas[0].stop.take().unwrap().send(true);
    let (b, watched) = (replicas[1].authority.clone(), moving.clone());
    let watcher = tokio::spawn(async move {
        loop {
            assert!(!b.owns(&watched), "b handles {watched} while a's turn still runs");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let took = revoked_within(&turn, DURATION * 2).await;
    assert!(took >= DURATION - Duration::from_millis(200), "revoked after {took:?}");
    assert!(!watcher.is_finished(), "b never took it meanwhile");
    watcher.abort();
    drop(turn);
    (&mut replicas[0].task).await.unwrap();
    settle(&replicas, &objects, &[1], Duration::from_secs(3)).await;
    assert!(objects.iter().all(|u| replicas[1].authority.owns(u)));
}

#[tokio::test(start_paused = true)]
async fn looks_at_an_unchanged_group_build_no_rings() {
    let api = Arc::new(FakeLeases::default());
    let clock = Clock::tokio();
    let objects = uids(100);
    let mut replicas = vec![member(&api, "a", clock).await];
    for me in ["b", "c"] {
        replicas.push(member(&api, me, clock).await);
    }
    settle(&replicas, &objects, &[0, 1, 2], Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = super::ring::BUILDS.with(|b| b.get());
    tokio::time::sleep(Duration::from_secs(10)).await; // 10 looks by each of 3 members
    let built = super::ring::BUILDS.with(|b| b.get()) - before;
    assert_eq!(built, 0, "rings built by 30 looks at an unchanged group");
}

/// A process frozen past its renew deadline (a paused VM, SIGSTOP, a starved runtime) may run
/// its workers before its coordination loop's timer revokes when it wakes. Here the loop is
/// stopped dead (as frozen) while it holds: past the deadline of its last renewal no turn is
/// current and none begins, though nothing revoked.
#[tokio::test(start_paused = true)]
async fn past_the_renew_deadline_no_turn_acts_though_the_loop_never_revoked() {
    for shards in [false, true] {
        let api = Arc::new(FakeLeases::default());
        let clock = Clock::tokio();
        let mut replicas = vec![if shards { member(&api, "a", clock).await } else { candidate(&api, "a", clock).await }];
        let all = ["any-object".to_string()];
        until_each_owned_once(&replicas, &all, Duration::from_secs(1)).await;
        let turn = replicas[0].authority.begin("any-object").expect("ours");
        replicas[0].kill();
        assert!(turn.is_current(), "shards {shards}: within the deadline of its last renewal");
        tokio::time::sleep(Timing::new(DURATION).renew_deadline + Duration::from_millis(100)).await;
        let authority = &replicas[0].authority;
        assert_ne!(authority.ownership(), Ownership::Nothing, "shards {shards}: nothing revoked");
        assert!(!turn.is_current(), "shards {shards}: past the deadline, the turn may not act");
        assert!(authority.begin("any-object").is_none(), "shards {shards}: and none begins");
    }
}
