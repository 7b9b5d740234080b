//! The schedule of one run, drawn from its seed: the objects' creations, updates and deletions,
//! and the faults (partitions, kills, graceful stops, handler server crashes and redeploys,
//! wall-clock steps, objects created again under their names, a long partition). Each class is
//! drawn after the ones before it, so that adding one leaves the earlier seeds' schedules as
//! they were.

use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;

use super::Without;

/// Replicas per run.
pub const REPLICAS: usize = 3;
/// Faults happen until then.
pub const FAULTS_UNTIL: Duration = Duration::from_secs(60);
/// Objects per run.
pub const OBJECTS: usize = 6;
/// How many seeds in a hundred have a long partition: one replica cut off from the API for
/// [`LONG_PARTITION`], longer than a retired worker remembers its last write (30 s) and than a
/// silent watch goes unnoticed (65 s); it outlasts the faults, and the run waits its quiet
/// period after it heals.
pub const LONG_PARTITIONS: f64 = 0.15;
pub const LONG_PARTITION: std::ops::Range<u64> = 66_000..80_000;
/// How often a deleted object is created again under its name.
pub const RECREATES: f64 = 0.4;
/// What happens at a point of the schedule.
#[derive(Debug, Clone)]
pub enum Action {
    Create(usize),
    Update(usize),
    Delete(usize),
    /// A deleted object created again under its name (a new uid), once the old one is gone.
    Recreate(usize),
    Partition(usize, Duration),
    /// A partition that the calm does not heal: it ends at its own time.
    LongPartition(usize, Duration),
    Heal(usize),
    Kill(usize),
    Stop(usize),
    Start(usize),
    Crash(usize),
    Revive(usize),
    /// The replica's handler server is deployed anew with its registry changed.
    Redeploy(usize),
    /// The replica's wall clock steps by this many milliseconds (an NTP step).
    Step(usize, i64),
    /// Someone writes hostile values into the Leases or the peering records (which of
    /// [`VANDALISMS`]).
    Vandalize(usize),
    Calm,
}

/// The schedule a seed draws.
pub fn plan(rng: &mut StdRng, without: &Without) -> Vec<(Duration, Action)> {
    let ms = |rng: &mut StdRng, from: u64, to: u64| Duration::from_millis(rng.random_range(from..to));
    let mut plan = Vec::new();
    for i in 0..OBJECTS {
        let at = if i < 4 { Duration::from_millis(500 + 100 * i as u64) } else { ms(rng, 5_000, 40_000) };
        plan.push((at, Action::Create(i)));
    }
    for _ in 0..3 {
        let (at, i) = (ms(rng, 2_000, 55_000), rng.random_range(0..OBJECTS));
        plan.push((at, Action::Update(i)));
    }
    let first = rng.random_range(0..OBJECTS);
    let second = (first + rng.random_range(1..OBJECTS)) % OBJECTS;
    let mut deletes = Vec::new();
    for i in [first, second] {
        let at = ms(rng, 10_000, 50_000);
        deletes.push((at, i));
        plan.push((at, Action::Delete(i)));
    }
    for _ in 0..rng.random_range(3..=6) {
        let (at, r, kind, d) = (ms(rng, 3_000, 55_000), rng.random_range(0..REPLICAS), rng.random_range(0..4), ms(rng, 1_000, 15_000));
        match kind {
            0 if !without.partition => plan.push((at, Action::Partition(r, d))),
            1 if !without.kill => {
                plan.push((at, Action::Kill(r)));
                plan.push((at + d / 2, Action::Start(r)));
            }
            2 if !without.stop => {
                plan.push((at, Action::Stop(r)));
                plan.push((at + d / 3, Action::Start(r)));
            }
            3 if !without.crash => {
                plan.push((at, Action::Crash(r)));
                plan.push((at + d / 2, Action::Revive(r)));
            }
            _ => {}
        }
    }
    // Drawn after the rest, so that the schedules above stay what their seeds gave before.
    if !without.redeploy && rng.random_bool(0.4) {
        plan.push((ms(rng, 3_000, 55_000), Action::Redeploy(rng.random_range(0..REPLICAS))));
    }
    if !without.recreate {
        for (at, i) in deletes {
            if rng.random_bool(RECREATES) {
                plan.push((at + ms(rng, 1_000, 10_000), Action::Recreate(i)));
            }
        }
    }
    if !without.steps && rng.random_bool(0.3) {
        let (at, r, by) = (ms(rng, 3_000, 55_000), rng.random_range(0..REPLICAS), rng.random_range(5_000..60_000i64));
        plan.push((at, Action::Step(r, if rng.random_bool(0.5) { by } else { -by })));
    }
    if !without.hostile && rng.random_bool(0.3) {
        plan.push((ms(rng, 3_000, 55_000), Action::Vandalize(rng.random_range(0..VANDALISMS.len()))));
    }
    if !without.long && rng.random_bool(LONG_PARTITIONS) {
        let (at, r, d) = (ms(rng, 2_000, 10_000), rng.random_range(0..REPLICAS), ms(rng, LONG_PARTITION.start, LONG_PARTITION.end));
        plan.push((at, Action::LongPartition(r, d)));
    }
    plan.push((FAULTS_UNTIL, Action::Calm));
    plan.sort_by_key(|(t, _)| *t);
    plan
}

/// Hostile values written into every Lease (leader election, shards) or into the peering
/// records (peering) as JSON merge patches: what a broken tool or a hand edit leaves there.
/// The API server may refuse some (as a real one validates a Lease); the others must neither
/// stop the replicas nor let two of them act at once. (A duration longer than ours is honoured,
/// as client-go honours it, so a huge one held by a dead replica stops everyone: not drawn.)
pub const VANDALISMS: [&str; 6] = [
    r#"{"spec": {"leaseTransitions": 2147483647}}"#,
    r#"{"spec": {"leaseDurationSeconds": 1}}"#,
    r#"{"spec": {"holderIdentity": "intruder-with-a-name-far-longer-than-any-identity-a-replica-would-have-0123456789abcdef"}}"#,
    r#"{"spec": {"renewTime": null, "acquireTime": null}}"#,
    r#"{"status": {"sim-intruder": {"priority": "high", "lastseen": 12, "lifetime": "forever"}}}"#,
    r#"{"status": {"sim-garbage": "not a record", "sim-null": null, "sim-list": [1, 2, 3]}}"#,
];
