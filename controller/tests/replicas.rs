//! Several real `bosun` processes against one dev cluster over real HTTP, each with a real
//! handler server over gRPC that records which replica handled which object and when:
//! peering (a higher priority pauses a lower one, kill -9 ends the pause after the lifetime,
//! `--dev` and `bosun freeze` pause), leader election (one leader; handover after kill -9
//! and after a graceful stop; 500 objects under a kill -9 loop of the leader) and shards
//! (1, 2 and 3 replicas on 3,000 objects: each handled once by its ring owner; a killed
//! replica's objects taken over after its Lease; timers and daemons move with their objects).

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_controller::cluster::Cluster;
use bosun_controller::coordination::ring::Ring;
use bosun_sdk::{Cause, HandlerError, Operator};
use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use support::Bosun;

/// One handler call (or daemon run): which replica, which handler, which object, when;
/// `end` is `None` while a daemon runs.
#[derive(Debug, Clone)]
struct Call {
    replica: usize,
    handler: &'static str,
    name: String,
    start: Instant,
    end: Option<Instant>,
}

type Calls = Arc<Mutex<Vec<Call>>>;

const KEX: &str = "kopf.dev/v1/kopfexamples";

/// A handler server for replica `replica`: `create_fn` takes 30 ms, so that two replicas
/// handling one object would overlap visibly. With `background`, also a daemon `watch_fn`
/// (which, asked to stop, takes 1 s to wind down, within its cancellation timeout of 2 s) and
/// a timer `tick_fn` every 0.5 s.
async fn handler_server(replica: usize, calls: Calls, background: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let record = move |calls: &Calls, handler, cause: &Cause, start, end| {
        let mut calls = calls.lock();
        calls.push(Call { replica, handler, name: cause.name().to_string(), start, end });
        calls.len() - 1
    };
    let c = calls.clone();
    let mut op = Operator::new()
        .on_create(KEX, move |cause: Cause| {
            let calls = c.clone();
            async move {
                let start = Instant::now();
                tokio::time::sleep(Duration::from_millis(30)).await;
                record(&calls, "create_fn", &cause, start, Some(Instant::now()));
                Ok::<_, HandlerError>(json!({"replica": replica}))
            }
        })
        .id("create_fn");
    if background {
        let c = calls.clone();
        op = op
            .on_daemon(KEX, move |cause: Cause| {
                let calls = c.clone();
                async move {
                    let i = record(&calls, "watch_fn", &cause, Instant::now(), None);
                    cause.stopped().wait().await;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    calls.lock()[i].end = Some(Instant::now());
                    Ok::<_, HandlerError>(())
                }
            })
            .id("watch_fn")
            .cancellation_timeout(Duration::from_secs(2));
        let c = calls.clone();
        op = op
            .on_timer(KEX, Duration::from_millis(500), move |cause: Cause| {
                let now = Instant::now();
                record(&c, "tick_fn", &cause, now, Some(now));
                async { Ok::<_, HandlerError>(()) }
            })
            .id("tick_fn");
    }
    tokio::spawn(op.serve_with_listener(listener, std::future::pending()));
    addr
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A dev cluster with the example CRD and the peering CRDs (and their `default` objects).
struct World {
    _cluster: bosun_devcluster::DevCluster,
    api: Cluster,
    kubeconfig: String,
    dir: tempfile::TempDir,
    calls: Calls,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let manifests = [examples().join("crd.yaml"), PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/peering.yaml")];
        let (cluster, api, kubeconfig) = support::dev_cluster(dir.path(), &manifests).await;
        World { _cluster: cluster, api, kubeconfig, dir, calls: Calls::default() }
    }

    /// Starts replica `n` with these extra flags.
    async fn bosun(&self, n: usize, flags: &[&str]) -> Bosun {
        self.bosun_with(n, flags, false).await
    }

    /// Starts replica `n`, its handler server with timers and daemons or not.
    async fn bosun_with(&self, n: usize, flags: &[&str], background: bool) -> Bosun {
        let addr = handler_server(n, self.calls.clone(), background).await;
        let identity = format!("replica-{n}");
        let mut args = vec!["run", "--kubeconfig", &self.kubeconfig, "--handler", &addr, "--identity", &identity];
        args.extend_from_slice(flags);
        Bosun::start(self.dir.path(), &args)
    }

    async fn create(&self, name: &str) {
        let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name}, "spec": {}});
        self.api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    }

    /// Creates the objects, eight at a time.
    async fn create_all(&self, names: &[String]) {
        futures::stream::iter(names).for_each_concurrent(8, |n| self.create(n)).await;
    }

    /// The objects, by name.
    async fn objects(&self) -> HashMap<String, Value> {
        let list = self.api.get("/apis/kopf.dev/v1/namespaces/default/kopfexamples").await.unwrap();
        let items = list["items"].as_array().unwrap();
        items.iter().map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o.clone())).collect()
    }

    /// Waits until every object named has been handled (its create handler's result is on
    /// it); returns when.
    async fn until_handled(&self, names: &[String], within: Duration) -> Instant {
        let deadline = Instant::now() + within;
        // Listing thousands of objects takes a while: look less often then.
        let every = Duration::from_millis(if names.len() > 100 { 500 } else { 100 });
        loop {
            let objects = self.objects().await;
            let done = names.iter().filter(|n| objects.get(*n).is_some_and(|o| o["status"]["create_fn"]["replica"].is_number())).count();
            if done == names.len() {
                return Instant::now();
            }
            assert!(Instant::now() < deadline, "{done} of {} objects handled within {within:?}", names.len());
            tokio::time::sleep(every).await;
        }
    }

    /// No object was handled by two replicas in overlapping time (handler calls and daemon
    /// runs alike; a daemon still running counts until now).
    fn assert_no_overlap(&self) {
        let calls = self.calls.lock();
        let now = Instant::now();
        let mut by_name: HashMap<&str, Vec<&Call>> = HashMap::new();
        for c in calls.iter() {
            by_name.entry(&c.name).or_default().push(c);
        }
        for (name, calls) in by_name {
            for (i, a) in calls.iter().enumerate() {
                for b in &calls[i + 1..] {
                    let overlap = a.replica != b.replica && a.start <= b.end.unwrap_or(now) && b.start <= a.end.unwrap_or(now);
                    assert!(
                        !overlap,
                        "{name} was handled by replicas {} ({}) and {} ({}) at once",
                        a.replica, a.handler, b.replica, b.handler
                    );
                }
            }
        }
    }

    /// Which replicas called `create_fn` for the object.
    fn handled_by(&self, name: &str) -> Vec<usize> {
        self.calls.lock().iter().filter(|c| c.name == name && c.handler == "create_fn").map(|c| c.replica).collect()
    }

    /// Where each object's timers and daemons run now: the replica running its daemon, when
    /// exactly one does and the object's latest timer call came from that replica too.
    fn background_at(&self) -> HashMap<String, usize> {
        let calls = self.calls.lock();
        let mut daemons: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut ticks: HashMap<&str, (Instant, usize)> = HashMap::new();
        for c in calls.iter() {
            match c.handler {
                "watch_fn" if c.end.is_none() => daemons.entry(&c.name).or_default().push(c.replica),
                "tick_fn" if ticks.get(c.name.as_str()).is_none_or(|(t, _)| *t < c.start) => {
                    ticks.insert(&c.name, (c.start, c.replica));
                }
                _ => {}
            }
        }
        daemons
            .into_iter()
            .filter_map(|(name, at)| match (at.as_slice(), ticks.get(name)) {
                ([r], Some((_, t))) if r == t => Some((name.to_string(), *r)),
                _ => None,
            })
            .collect()
    }
}

/// Replica `n` of `identity` (`replica-{n}`, with the random suffix the controller adds to a
/// configured identity).
fn replica(identity: &str) -> usize {
    identity.strip_prefix("replica-").and_then(|r| r.split('_').next()).and_then(|n| n.parse().ok()).unwrap()
}

/// Which replica the ring of these live members gives each object (by name), as the
/// controllers compute it (their identities, suffixes included, read from their Leases).
async fn ring_owners(w: &World, members: &[usize]) -> HashMap<String, usize> {
    let leases = w.api.get("/apis/coordination.k8s.io/v1/namespaces/default/leases").await.unwrap();
    let identities: Vec<String> = leases["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["spec"]["holderIdentity"].as_str())
        .filter(|h| h.starts_with("replica-") && members.contains(&replica(h)))
        .map(String::from)
        .collect();
    assert_eq!(identities.len(), members.len(), "the Leases of {members:?}: {identities:?}");
    let ring = Ring::new(identities);
    w.objects().await.into_iter().map(|(name, o)| (name, replica(ring.owner(o["metadata"]["uid"].as_str().unwrap()).unwrap()))).collect()
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn kill9(b: &mut Bosun) {
    b.send("KILL");
}

fn bosun_cmd(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_bosun")).args(args).current_dir(dir).output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lower_priority_controller_pauses_and_takes_over_when_the_higher_one_is_killed() {
    let w = World::new().await;
    let mut low = w.bosun(0, &["--priority", "0", "--peering-lifetime", "4"]).await;
    low.wait_line("Peering in ClusterBosunPeering default as replica-0 with priority 0.").await;
    w.create("before").await;
    w.until_handled(&["before".into()], Duration::from_secs(30)).await;

    let mut high = w.bosun(1, &["--priority", "100", "--peering-lifetime", "4"]).await;
    low.wait_line("Pausing operations in favour of [<Peer replica-1: priority=100").await;
    w.create("while-high").await;
    w.until_handled(&["while-high".into()], Duration::from_secs(30)).await;
    assert_eq!(w.handled_by("while-high"), [1], "only the higher one handles");

    // kill -9: only the lifetime tells the lower one that the higher one is gone.
    kill9(&mut high);
    let killed = Instant::now();
    low.wait_line("Resuming operations after the pause.").await;
    assert!(killed.elapsed() < Duration::from_secs(4 + 3), "resumed {:?} after the kill", killed.elapsed());
    w.create("after-kill").await;
    w.until_handled(&["after-kill".into()], Duration::from_secs(30)).await;
    assert_eq!(w.handled_by("after-kill"), [0]);

    // --dev pauses it; the developer's Ctrl-C removes its record and the deployed one resumes.
    let dev = w.bosun(2, &["--dev"]).await;
    low.wait_count("Pausing operations in favour of [<Peer replica-2: priority=666", 1).await;
    assert!(dev.interrupt().await.success());
    low.wait_count("Resuming operations after the pause.", 2).await;

    // bosun freeze / bosun resume, as kopf freeze / kopf resume.
    let out = bosun_cmd(w.dir.path(), &["freeze", "--lifetime", "60", "--id", "ops@laptop", "--kubeconfig", &w.kubeconfig]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Froze the controllers of ClusterBosunPeering default below priority 100"));
    low.wait_line("Pausing operations in favour of [<Peer ops@laptop: priority=100").await;
    w.create("frozen").await;
    let out = bosun_cmd(w.dir.path(), &["resume", "--id", "ops@laptop", "--kubeconfig", &w.kubeconfig]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    low.wait_count("Resuming operations after the pause.", 3).await;
    // Created while paused: listed again on resume and handled.
    w.until_handled(&["frozen".into()], Duration::from_secs(30)).await;
    assert_eq!(w.handled_by("frozen"), [0]);
    w.assert_no_overlap();
    assert!(low.interrupt().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_priorities_pause_all_and_a_missing_named_peering_is_an_error() {
    let w = World::new().await;
    let mut a = w.bosun(0, &["--peering-lifetime", "30"]).await;
    a.wait_line("Peering in ClusterBosunPeering default").await;
    let mut b = w.bosun(1, &["--peering-lifetime", "30"]).await;
    b.wait_line("Possibly conflicting operators with the same priority").await;
    a.wait_line("Pausing all operators, including self").await;
    w.create("nobody").await;
    // Both paused: give them time to (wrongly) handle it, then check nobody did.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(w.handled_by("nobody").is_empty());
    assert!(b.interrupt().await.success());
    a.wait_line("Resuming operations after the pause.").await;
    w.until_handled(&["nobody".into()], Duration::from_secs(30)).await;
    assert!(a.interrupt().await.success());

    let addr = handler_server(9, w.calls.clone(), false).await;
    let out = tokio::task::spawn_blocking({
        let (dir, kubeconfig) = (w.dir.path().to_path_buf(), w.kubeconfig.clone());
        move || bosun_cmd(&dir, &["run", "--kubeconfig", &kubeconfig, "--handler", &addr, "--peering", "absent"])
    })
    .await
    .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("The mandatory peering 'absent' was not found."), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_of_three_handles_and_hands_over_after_kill_9_and_after_a_graceful_stop() {
    let w = World::new().await;
    let flags = ["--standalone", "--leader-election", "--lease-namespace", "default", "--lease-duration", "4"];
    let mut replicas = vec![w.bosun(0, &flags).await];
    replicas[0].wait_line("Became the leader").await;
    replicas.push(w.bosun(1, &flags).await);
    replicas.push(w.bosun(2, &flags).await);
    for r in &mut replicas[1..] {
        r.wait_line("The leader is replica-0_").await;
    }
    let first = names("le-a", 20);
    for n in &first {
        w.create(n).await;
    }
    w.until_handled(&first, Duration::from_secs(60)).await;
    assert!(first.iter().all(|n| w.handled_by(n) == [0]), "only the leader handles");

    // kill -9 the leader while objects are being created: the Lease expires, one follower
    // takes over and handles them all.
    let second = names("le-b", 20);
    w.create(&second[0]).await;
    kill9(&mut replicas[0]);
    let killed = Instant::now();
    for n in &second[1..] {
        w.create(n).await;
    }
    let (_, rest) = replicas.split_at_mut(1);
    let (one, two) = rest.split_at_mut(1);
    let next = tokio::select! {
        _ = one[0].wait_line("Became the leader") => 1,
        _ = two[0].wait_line("Became the leader") => 2,
    };
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(4 + 2), "took over {took:?} after kill -9");
    w.until_handled(&second, Duration::from_secs(60)).await;

    // A graceful stop releases the Lease: the last follower leads within 2 s.
    let last = if next == 1 { 2 } else { 1 };
    replicas[next].send("TERM");
    let stopped = Instant::now();
    replicas[last].wait_line("Became the leader").await;
    assert!(stopped.elapsed() < Duration::from_secs(2), "graceful handover took {:?}", stopped.elapsed());
    w.create("le-c").await;
    w.until_handled(&["le-c".into()], Duration::from_secs(30)).await;
    assert_eq!(w.handled_by("le-c"), [last]);
    w.assert_no_overlap();
}

const SHARDS: [&str; 7] = ["--standalone", "--shards", "auto", "--lease-namespace", "default", "--lease-duration", "4"];

/// 1, 2 and 3 replicas (one after the other, each on a fresh dev cluster) share 3,000
/// objects: each is handled exactly once, by the replica the ring of the live members gives
/// it, never by two at once; each replica's share is within ±20 % of even. Then one of the
/// three is killed (kill -9): new objects of its share are handled by the others once its
/// Lease has expired, within the Lease duration + 2 s (+ the 2 s the creates take).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_of_1_2_and_3_replicas_share_3000_objects_each_handled_once_and_take_over_a_killed_replicas_share() {
    for n in 1..=3 {
        let w = World::new().await;
        let mut replicas = Vec::new();
        for i in 0..n {
            replicas.push(w.bosun(i, &SHARDS).await);
        }
        for r in &mut replicas {
            r.wait_line(&format!("Shard group 'bosun' has {n} member(s) now")).await;
        }
        let objects = names("sh", 3000);
        let started = Instant::now();
        w.create_all(&objects).await;
        w.until_handled(&objects, Duration::from_secs(300)).await;
        let took = started.elapsed();
        let owners = ring_owners(&w, &(0..n).collect::<Vec<_>>()).await;
        let mut per = vec![0usize; n];
        for name in &objects {
            let by = w.handled_by(name);
            assert_eq!(by.len(), 1, "{name} handled {} times, by replicas {by:?}", by.len());
            assert_eq!(by[0], owners[name], "{name} was handled by replica {}, not by its ring owner", by[0]);
            per[by[0]] += 1;
        }
        let even = 3000 / n;
        assert!(
            per.iter().all(|&c| c * 10 >= even * 8 && c * 10 <= even * 12),
            "{n} replicas: the spread {per:?} is not within ±20 % of {even}"
        );
        w.assert_no_overlap();
        eprintln!("{n} replica(s): 3000 objects handled in {took:.1?}, per replica {per:?}");
        if n < 3 {
            for r in replicas {
                assert!(r.interrupt().await.success());
            }
            continue;
        }

        // bosun shards lists the members and their objects.
        let out = bosun_cmd(w.dir.path(), &["shards", "--lease-namespace", "default", "--kubeconfig", &w.kubeconfig, "kopfexamples"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("3 live member(s)") && text.contains("replica-2"), "{text}");
        for (i, count) in per.iter().enumerate() {
            let row =
                text.lines().find(|l| l.starts_with(&format!("replica-{i}_"))).unwrap_or_else(|| panic!("no row for replica-{i}: {text}"));
            assert!(row.trim_end().ends_with(&format!(" {count}")), "replica-{i} should count {count}: {row}");
        }

        // kill -9 one replica: new objects of its share wait for its Lease to expire, then the
        // others handle them.
        kill9(&mut replicas[2]);
        let killed = Instant::now();
        let later = names("sh-late", 30);
        w.create_all(&later).await;
        let done = w.until_handled(&later, Duration::from_secs(30)).await;
        assert!(done - killed < Duration::from_secs(4 + 2 + 2), "taken over {:?} after the kill", done - killed);
        assert!(later.iter().all(|n| !w.handled_by(n).contains(&2)));
        w.assert_no_overlap();
    }
}

/// The Lease's holder now, if any (as `replica-{n}`, without its random suffix).
async fn leader(w: &World) -> Option<String> {
    let lease = w.api.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/bosun").await.ok()?;
    lease["spec"]["holderIdentity"].as_str().filter(|h| !h.is_empty()).map(|h| format!("replica-{}", replica(h)))
}

/// Leader election under fire: 3 replicas; 500 objects are created in five rounds of 100,
/// and halfway through each round the leader is killed (kill -9) and replaced by a new
/// replica. Every object is handled; no object is ever handled by two replicas at once (from
/// the handler calls' start and end times); every handover takes less than the Lease
/// duration + 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_under_a_kill_9_loop_of_the_leader_handles_all_500_objects_never_two_at_once() {
    let w = World::new().await;
    let flags = ["--standalone", "--leader-election", "--lease-namespace", "default", "--lease-duration", "4"];
    let mut replicas: HashMap<String, Bosun> = HashMap::new();
    for n in 0..3 {
        replicas.insert(format!("replica-{n}"), w.bosun(n, &flags).await);
    }
    let mut handovers = Vec::new();
    let all = names("loop", 500);
    for (k, round) in all.chunks(100).enumerate() {
        let next = 3 + k;
        let (first, second) = round.split_at(50);
        w.create_all(first).await;
        // Whoever leads now: the Lease says.
        let deadline = Instant::now() + Duration::from_secs(30);
        let holder = loop {
            if let Some(h) = leader(&w).await.filter(|h| replicas.contains_key(h)) {
                break h;
            }
            assert!(Instant::now() < deadline, "no live replica leads");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let mut gone = replicas.remove(&holder).unwrap();
        kill9(&mut gone);
        let killed = Instant::now();
        // Creating goes on while nobody leads; a new replica keeps three running.
        let creating = w.create_all(second);
        let replacing = w.bosun(next, &flags);
        let (_, fresh) = tokio::join!(creating, replacing);
        replicas.insert(format!("replica-{next}"), fresh);
        let deadline = killed + Duration::from_secs(30);
        loop {
            if leader(&w).await.is_some_and(|h| h != holder) {
                handovers.push(killed.elapsed());
                break;
            }
            assert!(Instant::now() < deadline, "nobody took over from {holder}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = gone.wait_exit().await;
    }
    w.until_handled(&all, Duration::from_secs(120)).await;
    w.assert_no_overlap();
    eprintln!("handovers after kill -9: {handovers:?}");
    assert!(handovers.iter().all(|t| *t < Duration::from_secs(4 + 2)), "a handover took the Lease duration + 2 s or more: {handovers:?}");
    // A leader killed right after it took over may have handled nothing: at least two did.
    let leaders: std::collections::BTreeSet<usize> = all.iter().flat_map(|n| w.handled_by(n)).collect();
    assert!(leaders.len() >= 2, "the objects were handled by successive leaders: {leaders:?}");
}

/// Timers and daemons move with their objects: 2 shard replicas run them for 30 objects, each
/// at the object's ring owner; a third replica joins and the objects the ring gives it move
/// there (their daemons are stopped, wound down, and started at the new owner; nothing else
/// moves); then one replica is killed (kill -9) and its objects' timers and daemons run at the
/// others within the Lease duration + 2 s. A daemon never runs at two replicas at once, even
/// while it winds down after being stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_and_daemons_move_with_their_objects_when_a_replica_joins_and_when_one_is_killed() {
    let w = World::new().await;
    let mut replicas = vec![w.bosun_with(0, &SHARDS, true).await, w.bosun_with(1, &SHARDS, true).await];
    for r in &mut replicas {
        r.wait_line("Shard group 'bosun' has 2 member(s) now").await;
    }
    let objects = names("bg", 30);
    w.create_all(&objects).await;
    let before = until_background_at(&w, &[0, 1], Duration::from_secs(60)).await;

    replicas.push(w.bosun_with(2, &SHARDS, true).await);
    for r in &mut replicas {
        r.wait_line("Shard group 'bosun' has 3 member(s) now").await;
    }
    let after = until_background_at(&w, &[0, 1, 2], Duration::from_secs(60)).await;
    let moved: Vec<&String> = objects.iter().filter(|n| before[*n] != after[*n]).collect();
    assert!(!moved.is_empty(), "the ring gave the new replica nothing");
    assert!(moved.iter().all(|n| after[*n] == 2), "only objects given to the new replica move");

    kill9(&mut replicas[1]);
    let killed = Instant::now();
    let last = until_background_at(&w, &[0, 2], Duration::from_secs(30)).await;
    assert!(killed.elapsed() < Duration::from_secs(4 + 2), "taken over {:?} after the kill", killed.elapsed());
    assert!(objects.iter().filter(|n| after[*n] == 1).count() > 0 && last.values().all(|r| *r != 1));
    w.assert_no_overlap();
}

/// Waits until every object's timer and daemon run at the object's owner in the ring of
/// these live members; returns where they run.
async fn until_background_at(w: &World, members: &[usize], within: Duration) -> HashMap<String, usize> {
    let owners = ring_owners(w, members).await;
    let deadline = Instant::now() + within;
    loop {
        let at = w.background_at();
        if owners.iter().all(|(name, owner)| at.get(name) == Some(owner)) {
            return at;
        }
        let wrong = owners.iter().filter(|(name, owner)| at.get(*name) != Some(owner)).count();
        assert!(
            Instant::now() < deadline,
            "{wrong} of {} objects' timers and daemons are not (only) at their owner in {members:?}",
            owners.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
