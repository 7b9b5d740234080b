//! Copies the Rust snippet under "## Writing a handler server in Rust" out of the README into
//! `$OUT_DIR/readme_snippet.rs`, which the `readme-snippet` binary compiles as it is written
//! (`tests/readme_sdk.rs` then runs it). The README is the only copy: a snippet that no longer
//! compiles, or a README without it, fails the build.

use std::path::{Path, PathBuf};

const HEADING: &str = "## Writing a handler server in Rust";

fn main() {
    // Read when the script runs, not baked in when it compiles: checkouts that share a target
    // directory share this script's binary.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let readme = Path::new(&manifest_dir).join("../README.md");
    println!("cargo::rerun-if-changed={}", readme.display());
    let text = std::fs::read_to_string(&readme).unwrap_or_else(|e| panic!("cannot read {}: {e}", readme.display()));
    let (code, first_line) = rust_block_under(&text, HEADING).unwrap_or_else(|e| panic!("{}: {e}", readme.display()));
    // Compiler errors point into this file: its line n is the README's line n + first_line - 2.
    let header = format!("// README.md lines {first_line}.., the ```rust block under {HEADING:?}: edit it there.\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("readme_snippet.rs");
    std::fs::write(&out, header + code).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}

/// The first ```` ```rust ```` block between `heading` and the next `## ` heading, and the
/// README line its code starts on.
fn rust_block_under<'a>(text: &'a str, heading: &str) -> Result<(&'a str, usize), String> {
    let (_, section) = text.split_once(&format!("\n{heading}\n")).ok_or_else(|| format!("no {heading:?} heading"))?;
    let section = section.split("\n## ").next().unwrap_or(section);
    let (_, block) = section.split_once("```rust\n").ok_or_else(|| format!("no ```rust block under {heading:?}"))?;
    let (code, _) = block.split_once("\n```").ok_or_else(|| format!("the ```rust block under {heading:?} is not closed"))?;
    let start = text.len() - block.len();
    Ok((code, text[..start].lines().count() + 1))
}
