//! A deterministic simulation of replicas: N copies of the real controller
//! (`bosun_controller::run`, with the real runtime and coordination code) against one
//! in-memory API server (the dev cluster's store, resourceVersions, Leases, watches) and
//! scripted handler servers, on tokio's paused clock, with faults drawn from a seeded RNG;
//! the invariants of one replica per object are checked on every run (see `tests/src/sim/README.md`).
//!
//! Why neither turmoil nor madsim: the code under test talks to the API server through a
//! `kube::Client` (a tower Service) and to handler servers through tonic. turmoil simulates
//! TCP sockets, which kube's and tonic's connectors would have to be rewired for; madsim
//! replaces tokio crate-wide (a patched tokio and a build cfg), which tonic, hyper and kube
//! would need as well. Instead everything runs in ONE current-thread tokio runtime with the
//! clock paused (it advances by itself when every task waits), all I/O in memory: the API as
//! the dev cluster's axum router called as a Service behind a fault layer per replica
//! ([`api`]), handler servers over `tokio::io::duplex` through the controller's `mem://`
//! transport ([`handlers`]).
//!
//! How deterministic: a seed fixes the schedule of faults, operations and clock skews, and
//! each link's and server's RNG. It does not fix everything: tokio's `select!` picks its
//! first branch at random (unseeded without `--cfg tokio_unstable`), `HashMap` iteration
//! order is random per process, peering's jitter uses the thread RNG, and the dev cluster's
//! garbage collector runs on the blocking pool. So a seed replays the same fault schedule,
//! and most failures it shows come back on a replay, but the interleaving may differ.

pub mod api;
pub mod handlers;
pub mod journal;
pub mod plan;
pub mod scenario;

use std::cell::RefCell;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use journal::Violation;

/// Random draws keyed by what they are for (`GET /api/v1/...`, `on_create obj-1`) and how
/// many times that was drawn before, not by the order of all draws: two tasks that make
/// requests at the same virtual instant may run in either order (tokio's `select!`), and
/// each still gets the fault its seed gives it.
pub struct Draws {
    seed: u64,
    counts: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

impl Draws {
    /// Draws from `seed`.
    pub fn new(seed: u64) -> Draws {
        Draws { seed, counts: Default::default() }
    }

    /// The RNG of the next draw for `key`.
    pub fn rng(&self, key: &str) -> rand::rngs::StdRng {
        let n = {
            let mut counts = self.counts.lock().unwrap();
            let n = counts.entry(key.to_string()).or_default();
            *n += 1;
            *n
        };
        // FNV-1a over the seed, the key and the count: stable across builds and platforms.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.seed.to_le_bytes().iter().chain(key.as_bytes()).chain(&n.to_le_bytes()) {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        rand::SeedableRng::seed_from_u64(h)
    }
}

/// How replicas share the objects in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `--leader-election`.
    LeaderElection,
    /// `--shards auto`.
    Shards,
    /// Kopf-style peering with a priority per replica.
    Peering,
}

/// Fault classes a run may leave out (`BOSUN_SIM_WITHOUT=skew,stalls,...`), to tell which
/// fault a failure needs; the schedule of the others stays the same.
#[derive(Debug, Clone, Default)]
pub struct Without {
    /// Every replica's clock is exact.
    pub skew: bool,
    /// No per-request API faults (latency, hangs, error statuses, resets, short watches).
    pub api: bool,
    /// Handlers are never slow or stalled.
    pub stalls: bool,
    /// Cancelled daemons end at once.
    pub lag: bool,
    /// No partitions.
    pub partition: bool,
    /// No long partition (longer than a retired worker's memory and the dead-watch window).
    pub long: bool,
    /// No kill -9.
    pub kill: bool,
    /// No graceful stops.
    pub stop: bool,
    /// No handler server crashes.
    pub crash: bool,
    /// No handler server deployed anew with its registry changed.
    pub redeploy: bool,
    /// No deleted object created again under its name.
    pub recreate: bool,
    /// No wall-clock steps.
    pub steps: bool,
    /// No hostile values in the Leases and peering records.
    pub hostile: bool,
}

impl Without {
    /// From `BOSUN_SIM_WITHOUT` (comma-separated names of the fields).
    pub fn from_env() -> Without {
        let given = std::env::var("BOSUN_SIM_WITHOUT").unwrap_or_default();
        let has = |name: &str| given.split(',').any(|g| g.trim() == name);
        Without {
            skew: has("skew"),
            api: has("api"),
            stalls: has("stalls"),
            lag: has("lag"),
            partition: has("partition"),
            long: has("long"),
            kill: has("kill"),
            stop: has("stop"),
            crash: has("crash"),
            redeploy: has("redeploy"),
            recreate: has("recreate"),
            steps: has("steps"),
            hostile: has("hostile"),
        }
    }
}

thread_local! {
    static PANICS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The panics on this thread since the last call (the hook is installed by [`run_seed`]).
pub fn panics() -> Vec<String> {
    PANICS.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.borrow_mut().push(info.to_string()));
            default(info);
        }));
    });
}

/// Whether the replicas' log lines go into the journal (unless `BOSUN_SIM_LOGS=0`: they cost
/// little, about a tenth of a run).
pub fn keep_logs() -> bool {
    std::env::var("BOSUN_SIM_LOGS").map_or(true, |v| v != "0")
}

/// A failing seed.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The mode.
    pub mode: Mode,
    /// The seed.
    pub seed: u64,
    /// The first broken invariant.
    pub violation: Violation,
    /// The journal around it.
    pub excerpt: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} seed {} broke invariant ({}) at {:.3} s: {}",
            self.mode,
            self.seed,
            self.violation.invariant,
            self.violation.at.as_secs_f64(),
            self.violation.text
        )
    }
}

/// Runs one seed on a runtime of its own (current thread, paused clock).
pub fn run_seed(mode: Mode, seed: u64) -> Option<Failure> {
    install_hook();
    let _ = panics();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().expect("a runtime");
    let (journal, violation) = rt.block_on(scenario::World::run(mode, seed));
    drop(rt);
    let violation = violation?;
    // A replayed seed shows its whole journal.
    let whole = std::env::var("BOSUN_SIM_SEED").is_ok() || std::env::var("BOSUN_SIM_JOURNALS").is_ok();
    let around = if whole { Duration::from_secs(3600) } else { Duration::from_secs(6) };
    let excerpt = journal::excerpt(&journal, violation.at, around);
    Some(Failure { mode, seed, violation, excerpt })
}

/// The seeds to run: `BOSUN_SIM_SEED=N` alone, else `BOSUN_SIM_SEEDS` of them (default
/// `default`) from `BOSUN_SIM_FIRST` (0; a soak picks up where the last one stopped).
pub fn seeds(default: u64) -> Vec<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|s| s.trim().parse::<u64>().ok());
    if let Some(seed) = var("BOSUN_SIM_SEED") {
        return vec![seed];
    }
    let (first, n) = (var("BOSUN_SIM_FIRST").unwrap_or(0), var("BOSUN_SIM_SEEDS").unwrap_or(default));
    (first..first.saturating_add(n)).collect()
}

/// Runs `seeds` of `mode` on `threads` threads (a runtime per seed); the failures, by seed.
pub fn run_seeds(mode: Mode, seeds: &[u64], threads: usize) -> Vec<Failure> {
    let next = AtomicU64::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(&seed) = seeds.get(i) else { return };
                    if std::env::var("BOSUN_SIM_VERBOSE").is_ok() {
                        eprintln!("{mode:?} seed {seed}: starts");
                    }
                    if let Some(f) = run_seed(mode, seed) {
                        eprintln!("{f}");
                        if let Ok(dir) = std::env::var("BOSUN_SIM_JOURNALS") {
                            // Replays are not exact (see above): the failing run's own journal.
                            let path = std::path::Path::new(&dir).join(format!("{mode:?}-{seed}.txt"));
                            let _ = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, format!("{f}\n{}", f.excerpt)));
                        }
                        failures.lock().unwrap().push(f);
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort_by_key(|f| f.seed);
    failures
}

/// Runs the seeds the environment asks for (300 by default) and panics, with every failing
/// seed and the journal around the first one's violation, if any seed broke an invariant.
pub fn check(mode: Mode) {
    let seeds = seeds(300);
    let threads = std::env::var("BOSUN_SIM_THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    let started = std::time::Instant::now();
    let failures = run_seeds(mode, &seeds, threads);
    let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
    for f in &failures {
        *by.entry(f.violation.invariant).or_default() += 1;
    }
    eprintln!("{mode:?}: {} of {} seed(s) failed {by:?} in {:.1} s", failures.len(), seeds.len(), started.elapsed().as_secs_f64());
    if let Some(first) = failures.first() {
        let all: Vec<String> = failures.iter().map(|f| f.to_string()).collect();
        panic!(
            "{} of {} seed(s) broke an invariant:\n{}\n\nthe first, around the violation (replay: BOSUN_SIM_SEED={}):\n{}",
            failures.len(),
            seeds.len(),
            all.join("\n"),
            first.seed,
            first.excerpt
        );
    }
}
