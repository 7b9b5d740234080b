//! Fidelity against a real kube-apiserver: replays the recorded golden transcripts
//! (`../shared/apiserver-golden` beside the checkout, or `BOSUN_GOLDEN_DIR`) against a fresh
//! dev cluster with `golden.py check` and requires every scenario to pass. Without the
//! transcripts or `python3` it fails under CI and is skipped, with a message, elsewhere.

#[path = "../../tests/src/tools.rs"]
mod tools;

use std::path::PathBuf;
use std::process::Command;

use bosun_devcluster::DevCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_golden_scenario_passes() {
    let dir = std::env::var("BOSUN_GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/apiserver-golden"));
    let script = dir.join("golden.py");
    if !tools::require_tool(&format!("the golden transcripts ({})", script.display()), script.is_file()) {
        return;
    }
    let python3 = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !tools::require_tool("`python3` on the PATH", python3) {
        return;
    }
    let dc = DevCluster::start_local().await.unwrap();
    let url = dc.url();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3").arg(&script).args(["check", "--server", &url, "--golden"]).arg(dir.join("v1.36")).output()
    })
    .await
    .unwrap()
    .expect("python3 runs golden.py");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "golden scenarios differ:\n{text}");
    dc.shutdown().await;
}
