//! Fault injection with real processes: `bosun dev` runs the dev cluster, the controller and a
//! Python SDK handler server as its supervised child; the handler makes its server exit
//! (`os._exit(1)`, as an OOM kill or a segfault would) on one object only. Each such call is
//! an attempt of the handler, so after its `retries` it fails permanently for that object,
//! the server is no longer crash-looped by it, and every other object is handled.
//!
//! Needs a Python with Bosun's SDK (`BOSUN_SDK_PYTHON`, else the workspace's `.venv`): under
//! `CI=true` its absence fails the test, elsewhere it is skipped (`tests/src/tools.rs`).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use bosun_controller::cluster::Cluster;
use serde_json::json;

mod support;

#[path = "../../tests/src/tools.rs"]
mod tools;

use support::Bosun;

/// The Python that imports Bosun's SDK (with its generated stubs), under the rule of
/// [`tools::require_tool`].
fn sdk_python() -> Option<PathBuf> {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = std::env::var_os("BOSUN_SDK_PYTHON").filter(|v| !v.is_empty()).map(PathBuf::from);
    let python = python.unwrap_or_else(|| workspace.join(".venv/bin/python"));
    let imports = std::process::Command::new(&python)
        .args(["-c", "import bosun.v1.handler_pb2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let what = "a Python with the bosun SDK (BOSUN_SDK_PYTHON, or the README's .venv: \
                python3 -m venv .venv && .venv/bin/pip install './sdk-python[test]')";
    tools::require_tool(what, imports).then_some(python)
}

const HANDLERS: &str = r#"
import os
import bosun as kopf

CALLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.txt")


@kopf.on.create("kopfexamples", retries=2, backoff=1)
def create_fn(name, **_):
    with open(CALLS, "a") as calls:
        calls.write(name + "\n")
    if name == "crasher":
        os._exit(1)  # The whole handler server goes, mid-call.
    return {"handled": name}
"#;

/// The dev cluster's API, through the kubeconfig `bosun dev` wrote.
async fn cluster(kubeconfig: &str) -> Cluster {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("the kubeconfig reads");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.expect("the kubeconfig is usable");
    Cluster::new(kube::Client::try_from(config).expect("a client"))
}

async fn create(cluster: &Cluster, name: &str) {
    let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name, "namespace": "default"}, "spec": {}});
    cluster.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &body).await.expect("the object is created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_kills_its_server_on_one_object_fails_permanently_after_its_retries_and_the_others_are_handled() {
    let Some(python) = sdk_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("handlers.py"), HANDLERS).unwrap();
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crd.yaml");
    let python = python.display().to_string();
    let args = ["dev", "--apply", crd.to_str().unwrap(), "--python", &python, "handlers.py"];
    let mut bosun = Bosun::start_with_env(dir.path(), &args, &[("PYTHONUNBUFFERED", "1")]);
    let export = bosun.wait_line("export KUBECONFIG=").await;
    let api = cluster(export.trim_start_matches("export KUBECONFIG=")).await;
    bosun.wait_line("Serving kopfexamples.v1.kopf.dev").await;

    for name in ["before-1", "before-2"] {
        create(&api, name).await;
    }
    for name in ["before-1", "before-2"] {
        bosun.wait_line(&format!("[default/{name}] Handler 'create_fn' succeeded.")).await;
    }
    create(&api, "crasher").await;
    bosun.wait_line("The handler server exited").await;
    // Created while the handler crash-loops its server: they must not wait for it to stop.
    for name in ["after-1", "after-2", "after-3"] {
        create(&api, name).await;
    }
    let failed = bosun.wait_line("[default/crasher] Handler 'create_fn' failed permanently:").await;
    assert!(failed.contains("has exceeded 2 retries"), "{failed}");
    for name in ["after-1", "after-2", "after-3"] {
        bosun.wait_line(&format!("[default/{name}] Handler 'create_fn' succeeded.")).await;
    }
    bosun.wait_line("[default/crasher] Creation is processed: 0 succeeded; 1 failed.").await;

    // Each crash was an attempt, in Kopf's words: two, then no more calls.
    let attempts = "[default/crasher] Handler 'create_fn' failed with an exception. Will retry. \
                    the connection to the handler server was lost during the call";
    assert_eq!(bosun.count(attempts), 2, "{}", bosun.seen.join("\n"));
    // Give a crash loop the time to show itself, were there one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = std::fs::read_to_string(dir.path().join("calls.txt")).unwrap();
    let crasher_calls = calls.lines().filter(|l| *l == "crasher").count();
    assert_eq!(crasher_calls, 2, "called twice (retries=2), then failed permanently without a call: {calls}");
    for name in ["before-1", "before-2"] {
        assert_eq!(calls.lines().filter(|l| l == &name).count(), 1, "{name} is handled once: {calls}");
    }
    let restarts = bosun.count("The handler server exited");
    assert_eq!(restarts, 2, "one restart per crash, none after: {}", bosun.seen.join("\n"));
    assert!(bosun.interrupt().await.success(), "Ctrl-C exits cleanly");
}
