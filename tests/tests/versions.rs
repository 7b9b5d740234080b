//! The version is written once, in the workspace's Cargo.toml: every crate takes it from
//! there, the Python wheel reads it (sdk-python/setup.py), the image's label gets it from
//! deploy/build-image, and CHANGELOG.md's newest release section names it. The npm package
//! must write it out (package.json): it is checked to be the same.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `[a, b, c]` of `x.y.z`, or `None` when it is not three numbers.
fn semver(text: &str) -> Option<[u64; 3]> {
    let parts: Vec<u64> = text.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    parts.try_into().ok()
}

/// The release sections of a changelog, newest first: `## X.Y.Z — YYYY-MM-DD` as (version,
/// date); an error names a `## ` heading of another form (only `## Unreleased`, first, is one).
fn releases(changelog: &str) -> Result<Vec<([u64; 3], String)>, String> {
    let mut out = Vec::new();
    for (n, heading) in changelog.lines().filter_map(|l| l.strip_prefix("## ")).enumerate() {
        if heading == "Unreleased" && n == 0 {
            continue;
        }
        let (version, date) = heading.split_once(" — ").ok_or_else(|| format!("not `X.Y.Z — date`: {heading:?}"))?;
        let version = semver(version).ok_or_else(|| format!("not a version: {heading:?}"))?;
        let date_ok = date.len() == 10 && date.char_indices().all(|(i, c)| if i == 4 || i == 7 { c == '-' } else { c.is_ascii_digit() });
        if !date_ok {
            return Err(format!("not a YYYY-MM-DD date: {heading:?}"));
        }
        out.push((version, date.to_string()));
    }
    Ok(out)
}

#[test]
fn every_crate_takes_the_workspace_version() {
    let workspace = read("Cargo.toml");
    let members = workspace.split("members = [").nth(1).and_then(|m| m.split(']').next()).expect("workspace members");
    for member in members.split(',').map(|m| m.trim().trim_matches('"')).filter(|m| !m.is_empty()) {
        let manifest = read(&format!("{member}/Cargo.toml"));
        let package = manifest.split("\n[").next().unwrap();
        assert!(package.contains("\nversion.workspace = true"), "{member}/Cargo.toml must take the workspace's version");
    }
    assert_eq!(semver(env!("CARGO_PKG_VERSION")).map(|_| ()), Some(()), "the workspace's version is X.Y.Z");
}

#[test]
fn the_wheel_and_the_image_read_the_workspace_version() {
    let pyproject = read("sdk-python/pyproject.toml");
    assert!(pyproject.contains("dynamic = [\"version\""), "the wheel's version comes from setup.py");
    assert!(!pyproject.lines().any(|l| l.starts_with("version")), "no version of its own in pyproject.toml");
    assert!(read("sdk-python/setup.py").contains("version=version()"), "setup.py reads ../Cargo.toml");
    let dockerfile = read("Dockerfile");
    assert!(dockerfile.contains("org.opencontainers.image.version=\"$VERSION\""), "the image labels its version");
    assert!(read("deploy/build-image").contains("--build-arg \"VERSION=$version\""), "build-image passes the workspace's");
}

#[test]
fn the_npm_package_has_the_workspace_version() {
    // package.json must hold a literal version: it is kept equal to the workspace's here.
    let package: serde_json::Value = serde_json::from_str(&read("sdk-typescript/package.json")).unwrap();
    assert_eq!(package["name"], "bosun-operator");
    assert_eq!(package["version"], env!("CARGO_PKG_VERSION"), "sdk-typescript/package.json's version is the workspace's");
    let examples = read("examples/typescript/package.json");
    assert!(!examples.contains(env!("CARGO_PKG_VERSION")), "the examples install the SDK's tarball by a pattern, not a version");
}

#[test]
fn the_changelog_is_grouped_by_version_and_its_newest_release_is_the_workspace_version() {
    let releases = releases(&read("CHANGELOG.md")).unwrap();
    assert!(!releases.is_empty(), "CHANGELOG.md has a `## X.Y.Z — date` section");
    assert_eq!(releases[0].0, semver(env!("CARGO_PKG_VERSION")).unwrap(), "the newest release is the workspace's version");
    for pair in releases.windows(2) {
        assert!(pair[0].0 > pair[1].0 && pair[0].1 >= pair[1].1, "newest first: {pair:?}");
    }
}

#[test]
fn release_headings_are_read_as_the_changelog_writes_them() {
    let ok = "# C\n\n## Unreleased\n\n- x\n\n## 0.2.0 — 2026-12-01\n\n## 0.1.0 — 2026-11-28\n";
    assert_eq!(releases(ok).unwrap(), vec![([0, 2, 0], "2026-12-01".to_string()), ([0, 1, 0], "2026-11-28".to_string())]);
    for bad in ["## 0.1 — 2026-11-28", "## 0.1.0 - 2026-11-28", "## 0.1.0 — 28.11.2026", "## 0.1.0\n## Unreleased", "## Notes"] {
        assert!(releases(bad).is_err(), "{bad:?}");
    }
}
