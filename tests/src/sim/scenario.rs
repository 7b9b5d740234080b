//! One simulated run: the world (the in-memory API, the replicas and their handler servers),
//! the schedule of object operations and faults drawn from the seed, and the checks at the end.
//!
//! Timeline (virtual, the schedule in `plan.rs`): objects are created from 0.5 s, updated and
//! some deleted while faults happen until [`FAULTS_UNTIL`]; then the world calms down (no more
//! faults, partitions healed, hung requests reset, servers and replicas up again) for
//! [`QUIET`], at least the Lease duration and the time retries and watches need to recover;
//! the invariants are checked then.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use bosun_controller::clock::Clock;
use bosun_controller::cluster::{Api, Cluster, content};
use bosun_controller::coordination::{LeaseSetup, PeeringSetup, Replicas};
use bosun_controller::{LogSink, Namespaces, Settings};
use bosun_devcluster::{DevCluster, InMemory};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::api::{Link, Rates, State};
use super::handlers::{Exists, Host};
use super::journal::{self, Journal, Violation};
use super::plan::{Action, FAULTS_UNTIL, OBJECTS, REPLICAS, VANDALISMS, plan};
use super::{Mode, Without};

/// The Lease duration (short, to keep virtual time short).
pub const LEASE: Duration = Duration::from_secs(4);
/// The peering records' lifetime (keepalives every 5–10 s before it ends, as Kopf's).
pub const PEERING_LIFETIME: Duration = Duration::from_secs(15);
/// Peering is a pause, not a lock (Kopf's): replicas overlap while they cannot see each
/// other's keepalives, and stop overlapping once they do. One object is handled by one
/// replica from this long after the faults stop: every peer has written a keepalive by then
/// and every lower one has seen the higher ones' (one keepalive interval, 5–10 s, at most).
pub const PEERING_SETTLE: Duration = Duration::from_secs(10);
/// The quiet period after the faults, before the end checks.
pub const QUIET: Duration = Duration::from_secs(25);
/// How long a graceful stop may take before the replica is killed (Kubernetes'
/// `terminationGracePeriodSeconds`).
const GRACE: Duration = Duration::from_secs(30);

/// Names of in-process handler servers must be unique among the runs of the process.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// One start of a replica: the controller, its link to the API and its handler server.
struct Incarnation {
    id: String,
    link: Link,
    host: Host,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), bosun_controller::Error>>,
    /// Until when a graceful stop may take.
    draining_until: Option<Instant>,
    /// Its wall clock's steps so far, in milliseconds (see `Clock::Stepping`).
    steps: &'static AtomicI64,
}

impl Incarnation {
    /// Kill -9: the run is dropped, its API path severed, its handler server gone.
    fn kill(&mut self) {
        self.task.abort();
        self.link.set(State::Severed);
        self.host.crash();
    }
}

/// A simulated object.
#[derive(Debug, Clone, Default)]
struct Object {
    uid: Option<String>,
    deleted: bool,
}

/// The world of one run.
pub struct World {
    mode: Mode,
    seed: u64,
    run: u64,
    journal: Journal,
    mem: InMemory,
    calm: watch::Sender<bool>,
    user: Cluster,
    rng: StdRng,
    slots: Vec<(u32, Option<Incarnation>)>,
    draining: Vec<Incarnation>,
    objects: Vec<Object>,
    exists: Exists,
    base: chrono::DateTime<chrono::Utc>,
    origin: Instant,
    violations: Vec<Violation>,
    without: Without,
    /// The replica under a long partition, and when it heals: the calm leaves it cut off.
    cut_off: Option<(usize, Duration)>,
}

fn name(i: usize) -> String {
    format!("obj-{i}")
}

impl World {
    /// Runs seed `seed` of `mode` to its end; the first broken invariant, if any.
    pub async fn run(mode: Mode, seed: u64) -> (Journal, Option<Violation>) {
        let mut world = World::new(mode, seed).await;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut plan: VecDeque<(Duration, Action)> = plan(&mut rng, &world.without).into();
        for r in 0..REPLICAS {
            world.start(r).await;
        }
        // After the faults, or after a long partition healed.
        let healed = plan
            .iter()
            .filter_map(|(at, a)| match a {
                Action::LongPartition(_, d) => Some(*at + *d),
                _ => None,
            })
            .fold(FAULTS_UNTIL, Duration::max);
        let end = healed + QUIET;
        // A run that does not end (a replica's start or stop that never returns) is a failure
        // of its own, shown with its journal.
        let bound = end + Duration::from_secs(300);
        let ran = tokio::time::timeout(bound, world.play(&mut plan, end)).await;
        let violation = match ran {
            Ok(()) => world.check(end),
            Err(_) => Some(Violation { invariant: "e", at: bound, text: format!("the run did not end within {} s", bound.as_secs()) }),
        };
        world.teardown();
        (world.journal.clone(), violation)
    }

    /// Plays the plan until `end`.
    async fn play(&mut self, plan: &mut VecDeque<(Duration, Action)>, end: Duration) {
        let world = self;
        let mut tick = Duration::from_secs(1);
        loop {
            let next = plan.front().map_or(end, |(t, _)| *t).min(tick).min(end);
            tokio::time::sleep_until(world.origin + next).await;
            if world.journal.now() >= end {
                break;
            }
            while plan.front().is_some_and(|(t, _)| *t <= world.journal.now()) {
                let (_, action) = plan.pop_front().expect("a front");
                if let Some((at, follow)) = world.apply(action).await {
                    let i = plan.partition_point(|(t, _)| *t <= at);
                    plan.insert(i, (at, follow));
                }
            }
            if world.journal.now() >= tick {
                world.supervise().await;
                tick += Duration::from_secs(1);
            }
        }
    }

    async fn new(mode: Mode, seed: u64) -> World {
        let mem = DevCluster::in_memory();
        let journal = Journal::new();
        let user = Cluster::new(kube::Client::new(mem.router.clone(), "default"));
        crate::kex::install_crd(user.client()).await;
        if mode == Mode::Peering {
            let peering = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/peering.yaml");
            bosun_controller::cluster::apply::apply_path(&user, &peering).await.expect("the peering CRDs apply");
        }
        mem.cluster.uids.seed(seed);
        let cluster = mem.cluster.clone();
        let exists: Exists = Arc::new(move |ns: &str, name: &str, uid: &str| {
            let Some(info) = cluster.registry.get("kopf.dev", "v1", "kopfexamples") else { return false };
            let obj = cluster.store.table(&info.storage, false).get(ns, name);
            obj.is_some_and(|o| o.value["metadata"]["uid"].as_str() == Some(uid))
        });
        World {
            mode,
            seed,
            run: RUNS.fetch_add(1, Ordering::Relaxed),
            origin: Instant::now() - journal.now(),
            journal,
            mem,
            calm: watch::Sender::new(false),
            user,
            rng: StdRng::seed_from_u64(seed ^ 0x5eed),
            slots: (0..REPLICAS).map(|_| (0, None)).collect(),
            draining: Vec::new(),
            objects: vec![Object::default(); OBJECTS],
            exists,
            base: chrono::Utc::now(),
            violations: Vec::new(),
            without: Without::from_env(),
            cut_off: None,
        }
    }

    /// The controller's settings for replica `r` as the CLI builds them for the mode.
    fn settings(&self, r: usize, identity: &str, addr: String, clock: Clock, sink: Option<LogSink>) -> Settings {
        let lease = LeaseSetup { name: "bosun-sim".into(), namespace: "default".into(), duration: LEASE };
        let (standalone, replicas) = match self.mode {
            Mode::LeaderElection => (true, Replicas::LeaderElection(lease)),
            Mode::Shards => (true, Replicas::Shards(lease)),
            Mode::Peering => (false, Replicas::Each),
        };
        Settings {
            handlers: vec![addr],
            namespaces: Namespaces::All,
            standalone,
            peering: PeeringSetup { name: "default".into(), mandatory: true, priority: r as i64 * 10, lifetime: PEERING_LIFETIME },
            identity: Some(identity.into()),
            replicas,
            log_sink: sink,
            clock,
            ..Default::default()
        }
    }

    async fn start(&mut self, r: usize) {
        if self.slots[r].1.is_some() {
            return;
        }
        self.slots[r].0 += 1;
        let generation = self.slots[r].0;
        let id = format!("r{r}.{generation}");
        let mix = self.seed.wrapping_mul(1_000_003).wrapping_add((r as u64) << 32 | u64::from(generation));
        let rates = if self.without.api { Rates::none() } else { Rates::default() };
        let link = Link::new(mix, self.calm.subscribe(), rates).journaling(self.journal.clone());
        let mut host = Host::new(
            &format!("sim{}-{id}", self.run),
            &id,
            mix ^ 0xabcd,
            self.journal.clone(),
            self.exists.clone(),
            self.calm.subscribe(),
        );
        host.without(self.without.stalls, self.without.lag);
        host.start().await;
        let skew = chrono::Duration::milliseconds(self.rng.random_range(-10_000..=10_000) * i64::from(!self.without.skew));
        // Leaked: a few words per start, for the clock's `'static` (it is `Copy`).
        let steps: &'static AtomicI64 = Box::leak(Box::new(AtomicI64::new(0)));
        let clock = Clock::Stepping { utc: self.base + skew, at: self.origin, step_ms: steps };
        // The replicas' log lines, in the journal (debug lines carry whole objects).
        let sink = super::keep_logs().then(|| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            let (journal, who) = (self.journal.clone(), id.clone());
            tokio::spawn(async move {
                while let Some(line) = rx.recv().await {
                    journal.note(&who, line);
                }
            });
            LogSink(tx)
        });
        // BOSUN_SIM_IDENTITY=same: one identity for every replica, as a Deployment template's
        // constant BOSUN_IDENTITY gives.
        let identity = if std::env::var("BOSUN_SIM_IDENTITY").is_ok_and(|v| v == "same") { "sim".to_string() } else { format!("sim-{id}") };
        let settings = self.settings(r, &identity, host.addr(), clock, sink);
        let (stop, stopped) = oneshot::channel::<()>();
        let client = link.client(self.mem.router.clone());
        let task = tokio::spawn(bosun_controller::run(client, settings, async move {
            let _ = stopped.await;
        }));
        self.journal.note("world", format!("start {id} (clock skew {} ms)", skew.num_milliseconds()));
        self.slots[r].1 = Some(Incarnation { id, link, host, stop: Some(stop), task, draining_until: None, steps });
    }

    /// Creates object `i` (again, after its deletion: a new uid under its name); whether it was.
    async fn create(&mut self, i: usize) -> bool {
        let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name(i), "namespace": "default"}, "spec": {"field": "v0", "items": []}});
        match self.user.create(&crate::kex::path("default"), &body).await {
            Ok(v) => {
                let uid = v["metadata"]["uid"].as_str().unwrap_or_default().to_string();
                self.journal.note("world", format!("created {} ({uid})", name(i)));
                self.journal.created(&name(i), &uid);
                self.objects[i] = Object { uid: Some(uid), deleted: false };
                true
            }
            Err(e) => {
                self.journal.note("world", format!("could not create {}: {e}", name(i)));
                false
            }
        }
    }

    /// Writes hostile values into every Lease, or into the peering records.
    async fn vandalize(&mut self, which: usize) {
        // The Lease's four for leader election and shards, the peering records' two for peering.
        let which = if self.mode == Mode::Peering { 4 + which % 2 } else { which % 4 };
        let patch: serde_json::Value = serde_json::from_str(VANDALISMS[which]).expect("the vandalisms are JSON");
        let paths: Vec<String> = if patch.get("spec").is_some() {
            let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
            let list = self.user.get(leases).await.unwrap_or_default();
            let items = list["items"].as_array().cloned().unwrap_or_default();
            items.iter().filter_map(|i| i["metadata"]["name"].as_str()).map(|n| format!("{leases}/{n}")).collect()
        } else {
            ["/apis/kopf.dev/v1/clusterkopfpeerings/default", "/apis/bosun.dev/v1/clusterbosunpeerings/default"].map(String::from).to_vec()
        };
        for path in paths {
            let r = self.user.patch(&path, content::MERGE, &patch).await;
            let outcome = r.map_or_else(|e| format!("refused: {e}"), |_| "written".into());
            self.journal.note("world", format!("hostile {} into {path}: {outcome}", VANDALISMS[which]));
        }
    }

    /// Cuts replica `r`'s link off for `d`; the heal to schedule.
    fn partition(&mut self, r: usize, d: Duration, what: &str) -> Option<(Duration, Action)> {
        let now = self.journal.now();
        let c = self.current(r)?;
        c.link.set(State::Partitioned);
        let id = c.id.clone();
        self.journal.note("world", format!("{what} {id} for {:.1} s", d.as_secs_f64()));
        Some((now + d, Action::Heal(r)))
    }

    fn current(&mut self, r: usize) -> Option<&mut Incarnation> {
        self.slots[r].1.as_mut()
    }

    /// Applies one action; returns a follow-up to schedule.
    async fn apply(&mut self, action: Action) -> Option<(Duration, Action)> {
        let now = self.journal.now();
        let calm = *self.calm.borrow();
        match action {
            Action::Create(i) => {
                self.create(i).await;
            }
            Action::Recreate(i) if self.objects[i].deleted && !calm => {
                // The old object may still be held by its finalizer: tried again until it is gone.
                if !self.create(i).await {
                    return Some((now + Duration::from_secs(2), Action::Recreate(i)));
                }
            }
            Action::Recreate(_) => {}
            Action::Update(i) if self.objects[i].uid.is_some() && !self.objects[i].deleted => {
                let path = format!("{}/{}", crate::kex::path("default"), name(i));
                let patch = json!({"spec": {"field": format!("v{}", now.as_millis())}});
                let r = self.user.patch(&path, content::MERGE, &patch).await;
                self.journal.note("world", format!("updated {}: {}", name(i), r.is_ok()));
            }
            Action::Delete(i) if self.objects[i].uid.is_some() && !self.objects[i].deleted => {
                let path = format!("{}/{}", crate::kex::path("default"), name(i));
                let r = <dyn Api>::request(&self.user, http::Method::DELETE, &path, None, None).await;
                self.objects[i].deleted = true;
                self.journal.note("world", format!("deleted {}: {}", name(i), r.is_ok()));
            }
            Action::Update(_) | Action::Delete(_) => {}
            Action::Partition(r, d) if !calm => return self.partition(r, d, "partition"),
            Action::LongPartition(r, d) => {
                let heal = self.partition(r, d, "long partition");
                if heal.is_some() {
                    self.cut_off = Some((r, now + d));
                }
                return heal;
            }
            Action::Heal(r) => {
                match self.cut_off {
                    // A short partition's heal within the long one: it goes on.
                    Some((cut, until)) if cut == r && now < until => return None,
                    Some((cut, _)) if cut == r => self.cut_off = None,
                    _ => {}
                }
                if let Some(c) = self.current(r) {
                    c.link.set(State::Up);
                    let id = c.id.clone();
                    self.journal.note("world", format!("heal {id}"));
                }
            }
            Action::Kill(r) if !calm => {
                if let Some(mut c) = self.slots[r].1.take() {
                    c.kill();
                    self.journal.note("world", format!("kill -9 {}", c.id));
                }
            }
            Action::Stop(r) if !calm => {
                if let Some(mut c) = self.slots[r].1.take() {
                    if let Some(stop) = c.stop.take() {
                        let _ = stop.send(());
                    }
                    c.draining_until = Some(Instant::now() + GRACE);
                    self.journal.note("world", format!("graceful stop of {}", c.id));
                    self.draining.push(c);
                }
            }
            Action::Start(r) => self.start(r).await,
            Action::Crash(r) if !calm => {
                if let Some(c) = self.current(r) {
                    c.host.crash();
                    let id = c.id.clone();
                    self.journal.note("world", format!("handler server of {id} crashes"));
                }
            }
            Action::Revive(r) => {
                if let Some(c) = self.current(r)
                    && !c.host.is_up()
                {
                    c.host.start().await;
                    let id = c.id.clone();
                    self.journal.note("world", format!("handler server of {id} is back"));
                }
            }
            Action::Redeploy(r) if !calm => {
                if let Some(c) = self.current(r) {
                    c.host.restart_changed().await;
                    let id = c.id.clone();
                    self.journal.note("world", format!("handler server of {id} deployed anew with its registry changed"));
                }
            }
            Action::Step(r, by) if !calm => {
                if let Some(c) = self.current(r) {
                    c.steps.fetch_add(by, Ordering::Relaxed);
                    let id = c.id.clone();
                    self.journal.note("world", format!("the wall clock of {id} steps by {:+.1} s", by as f64 / 1000.0));
                }
            }
            Action::Vandalize(which) if !calm => self.vandalize(which).await,
            Action::Partition(..)
            | Action::Kill(_)
            | Action::Stop(_)
            | Action::Crash(_)
            | Action::Redeploy(_)
            | Action::Step(..)
            | Action::Vandalize(_) => {}
            Action::Calm => {
                self.calm.send_replace(true);
                self.journal.note("world", "calm: no more faults");
                let cut_off = self.cut_off.map(|(r, _)| r);
                for r in 0..REPLICAS {
                    if let Some(c) = self.current(r)
                        && cut_off != Some(r)
                    {
                        c.link.set(State::Up);
                        if !c.host.is_up() {
                            c.host.start().await;
                        }
                    }
                    self.start(r).await;
                }
            }
        }
        None
    }

    /// Once a second: replicas that exited by themselves are started again (as Kubernetes
    /// restarts a pod); graceful stops that ended take their handler server with them, those
    /// past the grace period are killed.
    async fn supervise(&mut self) {
        for r in 0..REPLICAS {
            if self.slots[r].1.as_ref().is_some_and(|c| c.task.is_finished()) {
                let c = self.slots[r].1.take().expect("finished");
                self.ended(c, "exited by itself").await;
                self.start(r).await;
            }
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.draining.len() {
            let c = &self.draining[i];
            if c.task.is_finished() || c.draining_until.is_some_and(|t| now >= t) {
                let c = self.draining.swap_remove(i);
                let how = if c.task.is_finished() { "stopped" } else { "did not stop in time and is killed" };
                self.ended(c, how).await;
            } else {
                i += 1;
            }
        }
    }

    /// Notes how an incarnation ended (a panic breaks invariant d) and kills what is left.
    async fn ended(&mut self, mut c: Incarnation, how: &str) {
        let finished = c.task.is_finished();
        c.kill();
        let result = if finished { Some((&mut c.task).await) } else { None };
        let text = match result {
            None => String::new(),
            Some(Ok(Ok(()))) => ": Ok".into(),
            Some(Ok(Err(e))) => format!(": {e}"),
            Some(Err(e)) if e.is_panic() => {
                let at = self.journal.now();
                self.violations.push(Violation { invariant: "d", at, text: format!("{} panicked", c.id) });
                ": panicked".into()
            }
            Some(Err(_)) => ": cancelled".into(),
        };
        self.journal.note("world", format!("{} {how}{text}", c.id));
    }

    /// The invariants at the end.
    fn check(&mut self, end: Duration) -> Option<Violation> {
        if let Some(v) = self.violations.first() {
            return Some(v.clone());
        }
        let panics = super::panics();
        if let Some(p) = panics.first() {
            return Some(Violation { invariant: "d", at: end, text: format!("a panic: {p}") });
        }
        let spans = self.journal.spans();
        // The faults ended (or the long partition healed) `QUIET` before the end.
        let from = if self.mode == Mode::Peering { end - QUIET + PEERING_SETTLE } else { Duration::ZERO };
        if let Some(v) = journal::exclusive(&spans, from) {
            return Some(v);
        }
        if let Some(v) = journal::none_after_deletion(&spans, from) {
            return Some(v);
        }
        if let Some(v) = journal::in_order(&spans, from, &self.journal.write_faults()) {
            return Some(v);
        }
        let landings = self.journal.landings();
        if let Some(v) = journal::json_patches_once(&landings) {
            return Some(v);
        }
        if let Some(v) = journal::no_daemon_patch_after_its_turn(&spans, &landings, from) {
            return Some(v);
        }
        if let Some(v) = journal::successes_kept(&spans, &self.journal.successes(), from) {
            return Some(v);
        }
        let mut live = Vec::new();
        let mut lingering = Vec::new();
        for (i, o) in self.objects.iter().enumerate() {
            let Some(uid) = &o.uid else { continue };
            let present = (self.exists)("default", &name(i), uid);
            match (o.deleted, present) {
                (false, true) => live.push((uid.clone(), name(i))),
                (true, true) => lingering.push(name(i)),
                _ => {}
            }
        }
        journal::settled(&spans, &live, &lingering, end)
    }

    fn teardown(&mut self) {
        for r in 0..REPLICAS {
            if let Some(mut c) = self.slots[r].1.take() {
                c.kill();
            }
        }
        for c in &mut self.draining {
            c.kill();
        }
    }
}
