//! Running the real `kubectl` against a dev cluster, shared by the test files that do.

#[path = "../../../tests/src/tools.rs"]
mod tools;

use std::path::Path;
use std::process::Command;

use bosun_devcluster::DevCluster;

/// Runs `kubectl --kubeconfig KUBECONFIG ARGS` with `stdin` as its input; whether it
/// succeeded, and its stdout and stderr.
pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new("kubectl");
    cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Whether `kubectl` runs, under the rule of [`tools::require_tool`].
pub fn require_kubectl() -> bool {
    let works = Command::new("kubectl").arg("version").arg("--client").output().is_ok_and(|o| o.status.success());
    tools::require_tool("`kubectl` on the PATH (Debian's kubernetes-client)", works)
}

/// Runs `kubectl`, which must succeed; its output.
pub fn kubectl_ok(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let (ok, out) = kubectl(kubeconfig, args, stdin);
    assert!(ok, "kubectl {args:?} failed: {out}");
    out
}

/// Runs `test` on a blocking thread with the kubeconfig of a fresh dev cluster, or skips it
/// when `kubectl` is missing (see [`require_kubectl`]).
pub async fn with_kubectl(test: impl FnOnce(&Path) + Send + 'static) {
    if !require_kubectl() {
        return;
    }
    let dc = DevCluster::start_local().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    dc.write_kubeconfig(&kubeconfig).unwrap();
    tokio::task::spawn_blocking(move || test(&kubeconfig)).await.unwrap();
    dc.shutdown().await;
}
