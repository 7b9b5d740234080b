//! What the example end-to-end tests share.

use std::path::PathBuf;

/// The example binaries of this crate, which cargo builds (fresh) for its tests.
pub fn binary(name: &str) -> PathBuf {
    PathBuf::from(match name {
        "minimal" => env!("CARGO_BIN_EXE_minimal"),
        "children" => env!("CARGO_BIN_EXE_children"),
        "exceptions" => env!("CARGO_BIN_EXE_exceptions"),
        "events" => env!("CARGO_BIN_EXE_events"),
        "handlers" => env!("CARGO_BIN_EXE_handlers"),
        "subhandlers" => env!("CARGO_BIN_EXE_subhandlers"),
        "spies" => env!("CARGO_BIN_EXE_spies"),
        "builtins" => env!("CARGO_BIN_EXE_builtins"),
        "filtering" => env!("CARGO_BIN_EXE_filtering"),
        other => panic!("no example binary {other}"),
    })
}
