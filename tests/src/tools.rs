//! One rule for tests that need a tool from outside the workspace (`kubectl`, a Python with
//! `kubernetes` and `kopf`, the recorded API server transcripts): under CI (`CI=true`), where
//! `.ci/run` installs every such tool, a missing tool fails the test, so that a broken install
//! cannot pass as green; elsewhere the test is skipped and says so on the terminal.
//!
//! The dev cluster's tests include this file with `#[path]`: they cannot depend on this crate,
//! which depends on the dev cluster.

use std::io::Write as _;

/// Whether a test may go on: `true` when the tool it needs (`what`) is `present`. When it is
/// not, panics under CI; elsewhere prints that the test is skipped and returns `false`.
pub fn require_tool(what: &str, present: bool) -> bool {
    if present {
        return true;
    }
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    if let Some(ci) = std::env::var("CI").ok().filter(|v| !matches!(v.as_str(), "" | "0" | "false")) {
        panic!("{test} needs {what}, which is missing; under CI (CI={ci}) that fails the test: .ci/run must provide it");
    }
    // Straight to stderr, past the test harness's capture, so that the skip shows.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {what} is missing (under CI=true this fails)");
    false
}
