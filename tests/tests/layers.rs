//! The house rules that hold for the code itself (tests/ARCHITECTURE.md): no import circle in
//! the crates that have none left (drawn from the `use`/`mod` graph by
//! `tests/import_circles.py`), and no production file over 600 lines.

use std::path::{Path, PathBuf};
use std::process::Command;

use bosun_tests::tools;

/// The longest a production source file may be.
const MOST_LINES: usize = 600;

/// The crates (their folders) that are free of import circles, and must stay so.
const WITHOUT_CIRCLES: [&str; 4] = ["controller", "devcluster", "https", "sdk-rust"];

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn the_crates_without_import_circles_stay_without() {
    let python = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !tools::require_tool("python3", python) {
        return;
    }
    let out =
        Command::new("python3").arg(workspace().join("tests/import_circles.py")).args(WITHOUT_CIRCLES).output().expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "import circles:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    for krate in WITHOUT_CIRCLES {
        assert!(text.contains(&format!("== {krate}/")), "the audit looked at {krate}:\n{text}");
    }
}

/// Production sources under `dir`: not tests (`tests.rs`, `*_tests.rs`, `tests/`), not
/// generated code (`v1/`).
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            if !matches!(name.as_str(), "tests" | "v1" | "__pycache__") {
                sources(&path, out);
            }
        } else if (name.ends_with(".rs") || name.ends_with(".py")) && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_production_file_is_over_600_lines() {
    let mut files = Vec::new();
    for dir in ["controller/src", "devcluster/src", "sdk-rust/src", "https/src", "sdk-python/bosun"] {
        sources(&workspace().join(dir), &mut files);
    }
    assert!(files.len() > 100, "found the sources: {}", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > MOST_LINES).then(|| format!("{} ({lines} lines)", f.strip_prefix(workspace()).unwrap().display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MOST_LINES} lines: {long:?}");
}
