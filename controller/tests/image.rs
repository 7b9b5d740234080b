//! The image recipe without docker: the Dockerfile's own `cargo build` line, run here, gives a
//! static `bosun` (no ELF interpreter, no shared library needed) that runs `bosun --version`
//! in an empty root directory, as in the `scratch` image.

use std::path::{Path, PathBuf};
use std::process::Command;

use object::read::elf::{Dyn as _, ElfFile64, FileHeader as _, ProgramHeader as _};

#[path = "../../tests/src/tools.rs"]
mod tools;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The `cargo build ...` command of the Dockerfile, its `"$target"` filled in.
fn dockerfile_build(dockerfile: &str, target: &str) -> Vec<String> {
    let joined = dockerfile.replace("\\\n", " ");
    let line = joined
        .lines()
        .find(|l| !l.trim_start().starts_with('#') && l.contains("cargo build"))
        .expect("the Dockerfile builds with cargo build");
    let start = line.find("cargo build").unwrap();
    let command = line[start..].split("&&").next().unwrap();
    command.split_whitespace().map(|w| w.replace("\"$target\"", target)).collect()
}

/// Why `binary` is not static: its interpreter and the libraries it needs, if any.
fn dynamic_parts(binary: &Path) -> Vec<String> {
    let data = std::fs::read(binary).unwrap();
    let file = ElfFile64::<object::Endianness>::parse(&*data).expect("an ELF64 binary");
    let endian = file.endian();
    let mut parts = Vec::new();
    for header in file.elf_program_headers() {
        if header.p_type(endian) == object::elf::PT_INTERP {
            let interp = header.data(endian, &*data).unwrap_or_default();
            parts.push(format!("interpreter {}", String::from_utf8_lossy(interp).trim_end_matches('\0')));
        }
    }
    let sections = file.elf_header().sections(endian, &*data).unwrap();
    if let Some((dynamic, _)) = sections.dynamic(endian, &*data).unwrap() {
        for entry in dynamic {
            if entry.tag32(endian) == Some(object::elf::DT_NEEDED as _) {
                parts.push(format!("needs a shared library (DT_NEEDED {:?})", entry.d_val(endian)));
            }
        }
    }
    parts
}

#[test]
fn the_dockerfile_builds_a_static_bosun_that_runs_in_an_empty_root() {
    let host = std::env::consts::ARCH;
    let target = format!("{host}-unknown-linux-musl");
    let sysroot = Command::new("rustc").args(["--print", "target-libdir", "--target", &target]).output().unwrap();
    let has_target = sysroot.status.success() && Path::new(String::from_utf8_lossy(&sysroot.stdout).trim()).is_dir();
    let has_musl_gcc = Command::new("musl-gcc").arg("--version").output().is_ok_and(|o| o.status.success());
    if !tools::require_tool(&format!("the Rust target {target} (rustup target add) and musl-gcc (musl-tools)"), has_target && has_musl_gcc)
    {
        return;
    }
    let dockerfile = std::fs::read_to_string(workspace().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("\nFROM scratch\n"), "the image is empty but for the binary");
    assert!(dockerfile.contains("\nUSER 65532:65532\n"), "the image runs as a numeric non-root user");
    let build = dockerfile_build(&dockerfile, &target);
    assert_eq!(&build[..2], ["cargo", "build"], "{build:?}");
    // Into the workspace's target directory (its release build of the musl target only).
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace().join("target"));
    // Without the variables cargo sets for this test (ring's build script watches
    // CARGO_MANIFEST_DIR): with them, a binary built by the same line outside (CI builds it
    // once, for the wheel too) would be built again instead of found up to date.
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    let set_for_tests =
        ["CARGO_MANIFEST_", "CARGO_PKG_", "CARGO_CRATE_NAME", "CARGO_BIN_", "CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"];
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if set_for_tests.iter().any(|p| name.starts_with(p)) {
            cargo.env_remove(name.as_ref());
        }
    }
    let status = cargo.args(&build[1..]).arg("--target-dir").arg(&target_dir).current_dir(workspace()).status().unwrap();
    assert!(status.success(), "{build:?} failed");
    let binary = target_dir.join(format!("{target}/release/bosun"));

    assert_eq!(dynamic_parts(&binary), Vec::<String>::new(), "{} must be static", binary.display());

    // An empty root holding only the binary, entered through a user namespace (no privileges
    // needed): nothing to load from it but the binary itself.
    let root = tempfile::tempdir().unwrap();
    std::fs::copy(&binary, root.path().join("bosun")).unwrap();
    let out = Command::new("unshare").args(["--user", "--map-root-user", "chroot"]).arg(root.path()).args(["/bosun", "--version"]).output();
    let out = match out {
        Ok(out) => out,
        Err(e) => panic!("unshare (util-linux) could not run: {e}"),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bosun --version in an empty root failed: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("bosun {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1, "the root held only the binary");
}

#[test]
fn the_build_line_is_read_from_the_dockerfile() {
    let dockerfile = "# the `cargo build` line\nRUN target=x \\\n && cargo build --release --target \"$target\" -p a \\\n && cp x y\n";
    assert_eq!(dockerfile_build(dockerfile, "t"), ["cargo", "build", "--release", "--target", "t", "-p", "a"]);
}
