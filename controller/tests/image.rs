//! The image recipe: the Dockerfile's own `cargo build` line, run here, gives a static `bosun`
//! (no ELF interpreter, no shared library needed) that runs `bosun --version` in an empty root
//! directory, as in the `scratch` image; `deploy/build-image` builds the image from that binary
//! with podman, labelled with the workspace's version, and `bosun run` in it handles an object
//! of the dev cluster on the host's network. With `BOSUN_BINARY` set (as `./x test` and CI do),
//! that binary stands in for the Dockerfile line's: it must be static all the same.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use object::read::elf::{Dyn as _, ElfFile64, FileHeader as _, ProgramHeader as _};

mod support;
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

/// The static `bosun` of the Dockerfile's `cargo build` line, built on the host (once for this
/// binary's tests); `None` when the test is skipped for want of the musl target or musl-gcc.
fn static_binary() -> Option<PathBuf> {
    static BUILT: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(binary) = built.as_ref() {
        return Some(binary.clone());
    }
    // A static `bosun` built beforehand is taken as it is: `./x test` builds the tests and
    // that binary in one compilation (the Dockerfile's line in cargo's debug profile, for the
    // musl target, with jemalloc), instead of the whole tree once more in the release profile.
    if let Some(given) = std::env::var_os("BOSUN_BINARY") {
        let binary = PathBuf::from(given);
        *built = Some(binary.clone());
        return Some(binary);
    }
    let host = std::env::consts::ARCH;
    let target = format!("{host}-unknown-linux-musl");
    let sysroot = Command::new("rustc").args(["--print", "target-libdir", "--target", &target]).output().unwrap();
    let has_target = sysroot.status.success() && Path::new(String::from_utf8_lossy(&sysroot.stdout).trim()).is_dir();
    let has_musl_gcc = Command::new("musl-gcc").arg("--version").output().is_ok_and(|o| o.status.success());
    if !tools::require_tool(&format!("the Rust target {target} (rustup target add) and musl-gcc (musl-tools)"), has_target && has_musl_gcc)
    {
        return None;
    }
    let dockerfile = std::fs::read_to_string(workspace().join("Dockerfile")).unwrap();
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
    *built = Some(binary.clone());
    Some(binary)
}

#[test]
fn the_dockerfile_builds_a_static_bosun_that_runs_in_an_empty_root() {
    let dockerfile = std::fs::read_to_string(workspace().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("\nFROM scratch\n"), "the image is empty but for the binary");
    assert!(dockerfile.contains("\nUSER 65532:65532\n"), "the image runs as a numeric non-root user");
    let Some(binary) = static_binary() else { return };

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

/// podman with a store of its own (vfs: no daemon, no overlay mounts), removed with the test.
struct Podman {
    store: tempfile::TempDir,
    /// `--runtime runc` where runc is installed: crun refuses the hybrid cgroup hierarchy of
    /// some hosts ("cgroups in hybrid mode not supported"), runc runs there.
    runtime: Option<&'static str>,
}

impl Podman {
    fn new() -> Podman {
        let store = tempfile::tempdir().unwrap();
        let conf = format!("[storage]\ndriver = \"vfs\"\ngraphroot = \"{0}/graph\"\nrunroot = \"{0}/run\"\n", store.path().display());
        std::fs::write(store.path().join("storage.conf"), conf).unwrap();
        let runc = Command::new("runc").arg("--version").output().is_ok_and(|o| o.status.success());
        Podman { store, runtime: runc.then_some("runc") }
    }

    fn command(&self) -> Command {
        let mut command = Command::new("podman");
        command.env("CONTAINERS_STORAGE_CONF", self.store.path().join("storage.conf"));
        if let Some(runtime) = self.runtime {
            command.args(["--runtime", runtime]);
        }
        command
    }

    /// `podman run --rm` with at most 4096 open files and processes (less if this process has
    /// less): podman's defaults (the maximum) are above what some hosts let a container set
    /// ("error setting rlimit type 6: operation not permitted"), and one bosun needs far fewer.
    fn run(&self, name: &str) -> Command {
        let mut command = self.command();
        command.args(["run", "--rm", "--name", name, "--network", "host"]);
        for (limit, flag) in [("Max open files", "nofile"), ("Max processes", "nproc")] {
            let n = own_soft_limit(limit).unwrap_or(4096).min(4096);
            command.arg("--ulimit").arg(format!("{flag}={n}:{n}"));
        }
        command
    }

    fn output(&self, mut command: Command) -> String {
        let out = command.output().unwrap();
        assert!(out.status.success(), "{command:?}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// A container removed when the test ends, passed or not.
struct Container<'a>(&'a Podman, String);

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = self.0.command().args(["rm", "--force", "--time", "0", &self.1]).output();
    }
}

/// This process's soft limit named `name` in /proc/self/limits; `None` when unlimited.
fn own_soft_limit(name: &str) -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let rest = limits.lines().find_map(|l| l.strip_prefix(name))?;
    rest.split_whitespace().next()?.parse().ok()
}

#[tokio::test]
async fn the_image_is_built_with_podman_labelled_with_the_version_and_its_bosun_runs_against_the_dev_cluster() {
    let has_podman = Command::new("podman").arg("--version").output().is_ok_and(|o| o.status.success());
    if !tools::require_tool("podman (Debian's podman and runc)", has_podman) {
        return;
    }
    let Some(binary) = static_binary() else { return };
    let podman = Podman::new();
    let version = env!("CARGO_PKG_VERSION");
    let tag = format!("localhost/bosun-image-test:{version}");

    // deploy/build-image, as a user runs it, with the binary built above in the `build` stage's place.
    let mut build = Command::new(workspace().join("deploy/build-image"));
    build
        .arg(&tag)
        .env("BOSUN_BINARY", &binary)
        .env("CONTAINER_ENGINE", "podman")
        .env("CONTAINERS_STORAGE_CONF", podman.store.path().join("storage.conf"));
    let built = podman.output(build);
    assert!(built.ends_with(&format!("built {tag} (bosun {version})")), "{built}");

    // OCI's labels, from the one version in the workspace and its metadata.
    let mut inspect = podman.command();
    inspect.args(["image", "inspect", "--format", "{{json .Config.Labels}}", &tag]);
    let labels: serde_json::Value = serde_json::from_str(&podman.output(inspect)).unwrap();
    let label = |key: &str| labels[format!("org.opencontainers.image.{key}")].as_str().unwrap_or_default().to_string();
    assert_eq!(label("version"), version, "{labels}");
    assert_eq!(label("licenses"), env!("CARGO_PKG_LICENSE"), "{labels}");
    assert_eq!(label("source"), env!("CARGO_PKG_REPOSITORY"), "{labels}");
    assert_eq!(label("title"), "bosun", "{labels}");
    let revision = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(workspace()).output();
    if let Some(revision) = revision.ok().filter(|o| o.status.success()) {
        assert_eq!(label("revision"), String::from_utf8_lossy(&revision.stdout).trim(), "{labels}");
    }

    // Its binary runs, as the numeric non-root user.
    let name = format!("bosun-image-test-{}", std::process::id());
    let _version_container = Container(&podman, format!("{name}-version"));
    let mut run = podman.run(&format!("{name}-version"));
    run.args([&tag, "--version"]);
    assert_eq!(podman.output(run), format!("bosun {version}"));

    // `bosun run` in the image against a dev cluster on the host's network, with a handler
    // server on the host: the object it creates is handled.
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, api, kubeconfig) = support::dev_cluster(dir.path(), &[workspace().join("examples/crd.yaml")]).await;
    let handlers = support::succeeding_server().await;
    // The image's user (65532) reads the mounted kubeconfig.
    std::fs::set_permissions(&kubeconfig, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let _container = Container(&podman, name.clone());
    let mut run = podman.run(&name);
    run.arg("--volume").arg(format!("{kubeconfig}:/kubeconfig:ro"));
    run.args(["--env", "RUST_LOG=info", &tag, "run", "--kubeconfig", "/kubeconfig", "--handler", &handlers]);
    let mut bosun = support::Bosun::spawn(tokio::process::Command::from(run));
    bosun.wait_line("Serving kopfexamples.v1.kopf.dev").await;
    let obj = serde_json::json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "in-image"}, "spec": {}});
    api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    bosun.wait_line("[default/in-image] Handler 'create_fn' succeeded.").await;
}
