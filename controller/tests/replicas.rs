//! Several real `bosun` processes against one dev cluster over real HTTP, each with a real
//! handler server over gRPC that records which replica handled which object and when:
//! peering (a higher priority pauses a lower one, kill -9 ends the pause after the lifetime,
//! `--dev` and `bosun freeze` pause), leader election (one leader; handover after kill -9
//! and after a graceful stop) and shards (objects spread, each handled once, a killed
//! replica's objects taken over after its Lease).

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_controller::cluster::{Cluster, apply};
use bosun_sdk::{Cause, HandlerError, Operator};
use parking_lot::Mutex;
use serde_json::json;
use support::Bosun;

/// One handler call: which replica, which object, when.
#[derive(Debug, Clone)]
struct Call {
    replica: usize,
    name: String,
    start: Instant,
    end: Instant,
}

type Calls = Arc<Mutex<Vec<Call>>>;

/// A handler server for replica `replica`: `create_fn` takes 30 ms, so that two replicas
/// handling one object would overlap visibly.
async fn handler_server(replica: usize, calls: Calls) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let op = Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", move |cause: Cause| {
            let calls = calls.clone();
            async move {
                let start = Instant::now();
                tokio::time::sleep(Duration::from_millis(30)).await;
                calls.lock().push(Call { replica, name: cause.name().to_string(), start, end: Instant::now() });
                Ok::<_, HandlerError>(json!({"replica": replica}))
            }
        })
        .id("create_fn");
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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let cluster = bosun_devcluster::DevCluster::start(listener, bosun_devcluster::Config::default()).await.unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        cluster.write_kubeconfig(&kubeconfig).unwrap();
        let api = Cluster::new(cluster.client());
        for path in [examples().join("crd.yaml"), PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/peering.yaml")] {
            apply::apply_path(&api, &path).await.unwrap();
        }
        World { _cluster: cluster, api, kubeconfig: kubeconfig.display().to_string(), dir, calls: Calls::default() }
    }

    /// Starts replica `n` with these extra flags.
    async fn bosun(&self, n: usize, flags: &[&str]) -> Bosun {
        let addr = handler_server(n, self.calls.clone()).await;
        let identity = format!("replica-{n}");
        let mut args = vec!["run", "--kubeconfig", &self.kubeconfig, "--handler", &addr, "--identity", &identity];
        args.extend_from_slice(flags);
        Bosun::start(self.dir.path(), &args)
    }

    async fn create(&self, name: &str) {
        let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name}, "spec": {}});
        self.api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    }

    /// Waits until every object named has been handled (its create handler's result is on
    /// it); returns when.
    async fn until_handled(&self, names: &[String], within: Duration) -> Instant {
        let deadline = Instant::now() + within;
        loop {
            let list = self.api.get("/apis/kopf.dev/v1/namespaces/default/kopfexamples").await.unwrap();
            let done = list["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o["status"]["create_fn"]["replica"].is_number())
                .filter(|o| names.iter().any(|n| o["metadata"]["name"] == n.as_str()))
                .count();
            if done == names.len() {
                return Instant::now();
            }
            assert!(Instant::now() < deadline, "{done} of {} objects handled within {within:?}", names.len());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// No object was handled by two replicas in overlapping time.
    fn assert_no_overlap(&self) {
        let calls = self.calls.lock();
        for (i, a) in calls.iter().enumerate() {
            for b in &calls[i + 1..] {
                let overlap = a.name == b.name && a.start < b.end && b.start < a.end;
                assert!(!overlap, "{} was handled by replicas {} and {} at once", a.name, a.replica, b.replica);
            }
        }
    }

    fn handled_by(&self, name: &str) -> Vec<usize> {
        self.calls.lock().iter().filter(|c| c.name == name).map(|c| c.replica).collect()
    }
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

    let addr = handler_server(9, w.calls.clone()).await;
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
        r.wait_line("The leader is replica-0; following").await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_spread_the_objects_handle_each_once_and_take_over_a_killed_replicas_share() {
    let w = World::new().await;
    let flags = ["--standalone", "--shards", "auto", "--lease-namespace", "default", "--lease-duration", "4"];
    let mut replicas = Vec::new();
    for n in 0..3 {
        replicas.push(w.bosun(n, &flags).await);
    }
    for r in &mut replicas {
        r.wait_line("Shard group 'bosun' has 3 member(s) now").await;
    }
    let objects = names("sh", 300);
    for n in &objects {
        w.create(n).await;
    }
    w.until_handled(&objects, Duration::from_secs(120)).await;
    let mut per = [0usize; 3];
    for n in &objects {
        let by = w.handled_by(n);
        assert_eq!(by.len(), 1, "{n} handled {} times", by.len());
        per[by[0]] += 1;
    }
    assert!(per.iter().all(|&c| (60..=140).contains(&c)), "uneven spread: {per:?}");

    // bosun shards lists the members and their objects.
    let out = bosun_cmd(w.dir.path(), &["shards", "--lease-namespace", "default", "--kubeconfig", &w.kubeconfig, "kopfexamples"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("3 live member(s)") && text.contains("replica-2"), "{text}");

    // kill -9 one replica: new objects of its share wait for its Lease to expire, then the
    // others handle them.
    kill9(&mut replicas[2]);
    let killed = Instant::now();
    let later = names("sh-late", 30);
    for n in &later {
        w.create(n).await;
    }
    let done = w.until_handled(&later, Duration::from_secs(30)).await;
    assert!(done - killed < Duration::from_secs(4 + 2 + 2), "taken over {:?} after the kill", done - killed);
    assert!(later.iter().all(|n| !w.handled_by(n).contains(&2)));
    w.assert_no_overlap();
}
