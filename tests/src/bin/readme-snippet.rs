//! The README's Rust handler server ("Writing a handler server in Rust"), compiled exactly as
//! the README shows it, `#[tokio::main] async fn main` included: the build script copies it out
//! of README.md. `tests/readme_sdk.rs` runs it and asks it what it registered.

include!(concat!(env!("OUT_DIR"), "/readme_snippet.rs"));
