//! Two real `bosun` processes, each reaching the dev cluster through its own TCP proxy, with a
//! real handler server each whose daemon beats every 0.3 s and whose timer ticks every 0.3 s.
//! The first replica's proxy then stalls (requests and watch streams neither fail nor answer,
//! as behind a dead load balancer). The other replica takes over once the first one's Lease
//! has expired; the stalled replica's daemons and timers must have stopped by then, so that
//! every object's daemon runs once, at the new owner, and no object is ever handled by both:
//! not even one whose create handler was still running at the stalled replica.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_sdk::{Cause, HandlerError, Operator};
use parking_lot::Mutex;
use serde_json::json;
use support::Bosun;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

const KEX: &str = "kopf.dev/v1/kopfexamples";
const LEASE: u64 = 4;

/// What a handler server saw: a daemon's beat or end, or a timer's tick, of one object at one
/// replica, and when.
#[derive(Debug, Clone)]
struct Seen {
    replica: usize,
    what: &'static str,
    name: String,
    at: Instant,
}

type Journal = Arc<Mutex<Vec<Seen>>>;

/// One run of a daemon or a handler call: its start, and its end (none: it runs now).
type Run = (Instant, Option<Instant>);

/// A TCP proxy to `upstream` that can stall: while stalled, nothing it reads is passed on (in
/// either direction, on old and new connections alike), so requests hang and watches go silent.
struct Proxy {
    addr: String,
    stalled: watch::Sender<bool>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stalled, _) = watch::channel(false);
        let gate = stalled.clone();
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let Ok(up) = tokio::net::TcpStream::connect(&upstream).await else { continue };
                let (dr, dw) = down.into_split();
                let (ur, uw) = up.into_split();
                tokio::spawn(pipe(dr, uw, gate.subscribe()));
                tokio::spawn(pipe(ur, dw, gate.subscribe()));
            }
        });
        Proxy { addr, stalled }
    }

    fn stall(&self, on: bool) {
        self.stalled.send_replace(on);
    }
}

/// Copies `from` to `to`, holding each chunk while the gate says stalled.
async fn pipe(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, mut gate: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if gate.wait_for(|stalled| !*stalled).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Records the end of a handler call when dropped: when the call returns or is cancelled.
struct CallEnd {
    journal: Journal,
    replica: usize,
    name: String,
}

impl Drop for CallEnd {
    fn drop(&mut self) {
        self.journal.lock().push(Seen {
            replica: self.replica,
            what: "call-end",
            name: std::mem::take(&mut self.name),
            at: Instant::now(),
        });
    }
}

/// Replica `replica`'s handler server: a create handler `create_fn` (at replica 0, 20 s long
/// for objects named `slow-*`), a daemon `beat_fn` that records a beat every 0.3 s until it is
/// stopped (then its end), and a timer `tick_fn` every 0.3 s.
async fn handler_server(replica: usize, journal: Journal) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let note = move |journal: &Journal, what, cause: &Cause| {
        journal.lock().push(Seen { replica, what, name: cause.name().to_string(), at: Instant::now() });
    };
    let j = journal.clone();
    let op = Operator::new()
        .on_create(KEX, move |cause: Cause| {
            let journal = j.clone();
            async move {
                note(&journal, "call-start", &cause);
                let _end = CallEnd { journal, replica, name: cause.name().to_string() };
                if replica == 0 && cause.name().starts_with("slow") {
                    tokio::time::sleep(Duration::from_secs(20)).await;
                }
                Ok::<_, HandlerError>(json!({"replica": replica}))
            }
        })
        .id("create_fn");
    let j = journal.clone();
    let op = op
        .on_daemon(KEX, move |cause: Cause| {
            let journal = j.clone();
            async move {
                loop {
                    note(&journal, "beat", &cause);
                    tokio::select! {
                        _ = cause.stopped().wait() => break,
                        _ = tokio::time::sleep(Duration::from_millis(300)) => {}
                    }
                }
                note(&journal, "end", &cause);
                Ok::<_, HandlerError>(())
            }
        })
        .id("beat_fn");
    let op = op
        .on_timer(KEX, Duration::from_millis(300), move |cause: Cause| {
            note(&journal, "tick", &cause);
            async { Ok::<_, HandlerError>(()) }
        })
        .id("tick_fn");
    tokio::spawn(op.serve_with_listener(listener, std::future::pending()));
    addr
}

struct World {
    cluster: bosun_devcluster::DevCluster,
    api: bosun_controller::cluster::Cluster,
    dir: tempfile::TempDir,
    journal: Journal,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let crd = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crd.yaml");
        let (cluster, api, _) = support::dev_cluster(dir.path(), &[crd]).await;
        World { cluster, api, dir, journal: Journal::default() }
    }

    /// Starts replica `n` behind a proxy of its own, with these flags.
    async fn replica(&self, n: usize, flags: &[&str]) -> (Bosun, Proxy) {
        let upstream = self.cluster.url();
        let proxy = Proxy::start(upstream.trim_start_matches("http://").trim_end_matches('/').to_string()).await;
        let kubeconfig = self.dir.path().join(format!("kubeconfig-{n}"));
        std::fs::write(&kubeconfig, self.cluster.kubeconfig_yaml().replace(&upstream, &format!("http://{}", proxy.addr))).unwrap();
        let addr = handler_server(n, self.journal.clone()).await;
        let identity = format!("replica-{n}");
        let mut args = vec!["run", "--kubeconfig", kubeconfig.to_str().unwrap(), "--handler", &addr, "--identity", &identity];
        args.extend_from_slice(flags);
        (Bosun::start(self.dir.path(), &args), proxy)
    }

    async fn create(&self, names: &[String]) {
        for name in names {
            let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name}, "spec": {}});
            self.api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
        }
    }

    /// The replica each object's latest beat came from, once every object has beaten at
    /// `replica` after `since`; fails after `within`.
    async fn until_beating_at(&self, names: &[String], replica: usize, since: Instant, within: Duration) -> Instant {
        let deadline = Instant::now() + within;
        loop {
            let beating: Vec<&String> = {
                let journal = self.journal.lock();
                names
                    .iter()
                    .filter(|n| journal.iter().any(|s| s.what == "beat" && s.replica == replica && &s.name == *n && s.at >= since))
                    .collect()
            };
            if beating.len() == names.len() {
                return Instant::now();
            }
            assert!(Instant::now() < deadline, "{} of {} daemons beat at replica {replica} within {within:?}", beating.len(), names.len());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What replica `replica` did for each object after `after`: beats, ticks and ends.
    fn seen_after(&self, replica: usize, after: Instant) -> Vec<Seen> {
        self.journal.lock().iter().filter(|s| s.replica == replica && s.at > after).cloned().collect()
    }

    /// Waits until `replica` has started the create handler of `name`.
    async fn until_called(&self, name: &str, replica: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.journal.lock().iter().any(|s| s.what == "call-start" && s.replica == replica && s.name == name) {
            assert!(Instant::now() < deadline, "replica {replica} did not call create_fn for {name} within {within:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Per object: its daemon runs, and its create handler is called, at most once at a time
    /// over all replicas (a daemon runs from its first beat to its end, or now).
    fn assert_never_two_at_once(&self) {
        let journal = self.journal.lock();
        let now = Instant::now();
        // (name, replica) → runs as [start, end or now], in order.
        let mut runs: HashMap<(String, usize), Vec<Run>> = HashMap::new();
        for s in journal.iter() {
            let list = runs.entry((s.name.clone(), s.replica)).or_default();
            match s.what {
                "beat" | "call-start" if list.last().is_none_or(|(_, end)| end.is_some()) => list.push((s.at, None)),
                "end" | "call-end" => {
                    if let Some(last) = list.last_mut() {
                        last.1 = Some(s.at);
                    }
                }
                _ => {}
            }
        }
        for ((name, a), ra) in &runs {
            for ((other, b), rb) in &runs {
                if name != other || a >= b {
                    continue;
                }
                for (sa, ea) in ra {
                    for (sb, eb) in rb {
                        let overlap = sa <= &eb.unwrap_or(now) && sb <= &ea.unwrap_or(now);
                        assert!(!overlap, "{name} was handled at replicas {a} and {b} at once");
                    }
                }
            }
        }
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Stalls replica 0's path to the API server while it runs every daemon and timer; checks that
/// they stop there within the Lease duration and run once at replica 1.
async fn a_stalled_replica_stops_its_daemons_and_timers(flags: &[&str], first_line: &str, second_line: &str) {
    let w = World::new().await;
    let (mut first, stalled_path) = w.replica(0, flags).await;
    first.wait_line(first_line).await;
    let mut objects = names("st", 5);
    w.create(&objects).await;
    w.until_beating_at(&objects, 0, Instant::now(), Duration::from_secs(30)).await;
    // A create handler that runs for 20 s is in flight at replica 0 when its path stalls.
    let slow = "slow-0".to_string();
    w.create(std::slice::from_ref(&slow)).await;
    w.until_called(&slow, 0, Duration::from_secs(30)).await;
    objects.push(slow.clone());
    let (mut second, _path) = w.replica(1, flags).await;
    second.wait_line(second_line).await;
    stalled_path.stall(true);
    let stalled = Instant::now();
    let taken = w.until_beating_at(&objects, 1, stalled, Duration::from_secs(LEASE + 15)).await;
    // Let a few more beats come, to see that replica 0 stays quiet.
    w.until_beating_at(&objects, 1, taken + Duration::from_secs(1), Duration::from_secs(10)).await;
    let after = w.seen_after(0, stalled + Duration::from_secs(LEASE));
    assert!(after.is_empty(), "replica 0 went on after its Lease was gone: {after:?}");
    let ended: Vec<String> = w.seen_after(0, stalled).into_iter().filter(|s| s.what == "end").map(|s| s.name).collect();
    for name in &objects {
        assert!(ended.contains(name), "{name}'s daemon at the stalled replica never ended: {ended:?}");
    }
    w.until_called(&slow, 1, Duration::from_secs(10)).await;
    w.assert_never_two_at_once();
    stalled_path.stall(false);
    drop(first);
    assert!(second.interrupt().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_leader_stops_its_daemons_and_timers_within_the_lease_and_they_run_once_at_the_new_leader() {
    let lease = LEASE.to_string();
    let flags = ["--standalone", "--leader-election", "--lease-namespace", "default", "--lease-duration", &lease];
    a_stalled_replica_stops_its_daemons_and_timers(&flags, "Became the leader", "The leader is replica-0").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_shard_member_stops_its_daemons_and_timers_within_the_lease_and_they_run_once_at_the_other() {
    let lease = LEASE.to_string();
    let flags = ["--standalone", "--shards", "auto", "--lease-namespace", "default", "--lease-duration", &lease];
    a_stalled_replica_stops_its_daemons_and_timers(
        &flags,
        "Shard group 'bosun' has 1 member(s) now",
        "Shard group 'bosun' has 2 member(s) now",
    )
    .await;
}
