//! The replica simulation (`tests/src/sim`): each mode's seeds, checked for the
//! invariants. `BOSUN_SIM_SEED=N` replays one seed, `BOSUN_SIM_SEEDS=N` runs the first N
//! (300 by default), `BOSUN_SIM_THREADS` sets the threads (2).

use bosun_tests::sim::{Mode, check};

#[test]
fn leader_election() {
    check(Mode::LeaderElection);
}

#[test]
fn shards() {
    check(Mode::Shards);
}

#[test]
fn peering() {
    check(Mode::Peering);
}
