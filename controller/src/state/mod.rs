//! Pure logic of the handling cycle: causes, essence, diff, progress, storage, the handler
//! registry and what attempts mean. No I/O and no async here; everything is table-tested.

pub mod admission;
pub mod causes;
pub mod delays;
pub mod diff;
pub mod essence;
pub mod inspect;
pub mod keys;
pub mod outcomes;
pub mod patches;
pub mod plan;
pub mod progress;
pub mod registry;
pub mod storage;

#[cfg(test)]
pub(crate) mod arbitrary;
#[cfg(test)]
mod hostile_tests;
