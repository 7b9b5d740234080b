//! The real `bosun` binary, as a user runs it: `bosun dev` starts the dev cluster, applies
//! manifests, runs the controller against a handler server, keeps the cluster's data across
//! restarts (so handled objects are not handled again), exits cleanly on Ctrl-C, and
//! supervises a handler server command, ending everything it started when bosun stops.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::json;
use tokio::process::Command;

mod support;

use support::{Bosun, T, kubectl, running};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

async fn handler_server(calls: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let op = Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", move |_cause: Cause| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, HandlerError>(json!({"message": "hello world"}))
            }
        })
        .id("create_fn");
    tokio::spawn(op.serve_with_listener(listener, std::future::pending()));
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_dev_handles_keeps_its_data_and_does_not_handle_again_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let addr = handler_server(calls.clone()).await;
    let (crd, obj) = (examples().join("crd.yaml"), examples().join("obj.yaml"));
    let args = ["dev", "--apply", crd.to_str().unwrap(), "--apply", obj.to_str().unwrap(), "--handler", &addr];

    let mut bosun = Bosun::start(dir.path(), &args);
    let export = bosun.wait_line("export KUBECONFIG=").await;
    let kubeconfig = export.trim_start_matches("export KUBECONFIG=").to_string();
    assert!(Path::new(&kubeconfig).starts_with(dir.path().canonicalize().unwrap()), "{kubeconfig}");
    bosun.wait_line("[default/kopf-example-1] Handler 'create_fn' succeeded.").await;
    bosun.wait_line("[default/kopf-example-1] Creation is processed: 1 succeeded; 0 failed.").await;
    let got = kubectl(&kubeconfig, &["get", "kex", "kopf-example-1"]);
    assert_eq!(got["status"]["create_fn"]["message"], "hello world");
    assert!(bosun.interrupt().await.success(), "Ctrl-C exits cleanly");

    let mut bosun = Bosun::start(dir.path(), &args);
    let export = bosun.wait_line("export KUBECONFIG=").await;
    let kubeconfig = export.trim_start_matches("export KUBECONFIG=").to_string();
    bosun.wait_line("Serving kopfexamples.v1.kopf.dev").await;
    let out = std::process::Command::new("kubectl")
        .args(["--kubeconfig", &kubeconfig, "create", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(b"apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata: {name: kopf-example-2}\nspec: {}\n")?;
            c.wait()
        })
        .unwrap();
    assert!(out.success());
    bosun.wait_line("[default/kopf-example-2] Creation is processed: 1 succeeded; 0 failed.").await;
    assert_eq!(bosun.count("[default/kopf-example-1]"), 0, "the handled object is not handled again");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one call per object across both runs");
    assert!(bosun.interrupt().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_dev_restarts_a_crashing_handler_command_with_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let mut bosun = Bosun::start(dir.path(), &["dev", "--", "sh", "-c", "echo listening on $BOSUN_LISTEN with $KUBECONFIG; exit 3"]);
    let line = bosun.wait_line("[handler] listening on 127.0.0.1:").await;
    assert!(line.ends_with("/kubeconfig"), "the child gets the dev cluster's kubeconfig: {line}");
    bosun.wait_line("The handler server exited (exit status: 3); restarting it in 1s.").await;
    bosun.wait_line("The handler server exited (exit status: 3); restarting it in 2s.").await;
    bosun.wait_count("[handler] listening on 127.0.0.1:", 2).await; // started again
    assert!(bosun.interrupt().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_server_gets_the_controllers_kubeconfig_and_context() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Bosun::start(dir.path(), &["dev", "--cluster-only", "--dir", "cluster"]);
    let export = cluster.wait_line("export KUBECONFIG=").await;
    let kubeconfig = export.trim_start_matches("export KUBECONFIG=").to_string();
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    let context = text.lines().find_map(|l| l.trim().strip_prefix("current-context:")).expect("a current context").trim().to_string();
    let script = "echo child sees $KUBECONFIG in $BOSUN_CONTEXT; sleep 60";
    let mut bosun = Bosun::start(dir.path(), &["dev", "--kubeconfig", &kubeconfig, "--context", &context, "--", "sh", "-c", script]);
    let line = bosun.wait_line("[handler] child sees ").await;
    assert!(line.ends_with(&format!("child sees {kubeconfig} in {context}")), "{line}");
    assert!(bosun.interrupt().await.success());
    assert!(cluster.interrupt().await.success());
}

/// Starts `bosun dev` with the handler command `sh -c script`, where `script` starts a server
/// (`sleep`) in the background, as `npm start` starts node, and says `server pid $!`; returns
/// the server's pid.
async fn bosun_dev_with_a_grandchild(dir: &Path, script: &str) -> (Bosun, u32) {
    let mut bosun = Bosun::start(dir, &["dev", "--", "sh", "-c", script]);
    let line = bosun.wait_line("[handler] server pid ").await;
    let server = line.rsplit(' ').next().and_then(|pid| pid.parse().ok()).unwrap_or_else(|| panic!("no pid in {line:?}"));
    (bosun, server)
}

/// Waits until `pid` no longer runs; kills it and fails when it still does after `T`.
async fn wait_gone(pid: u32) {
    let deadline = tokio::time::Instant::now() + T;
    while running(pid) {
        if tokio::time::Instant::now() >= deadline {
            let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            panic!("the handler command's grandchild {pid} still ran {T:?} after it should have ended");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_dev_ends_everything_the_handler_command_started_when_it_gets_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (bosun, server) = bosun_dev_with_a_grandchild(dir.path(), "sleep 1000 & echo server pid $!; wait").await;
    assert!(running(server), "the grandchild runs before bosun stops");
    assert!(bosun.signal("TERM").await.success(), "SIGTERM exits cleanly");
    wait_gone(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_dev_ends_what_an_exited_handler_command_left_running_before_restarting_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bosun, server) = bosun_dev_with_a_grandchild(dir.path(), "sleep 1000 & echo server pid $!; exit 3").await;
    bosun.wait_line("The handler server exited (exit status: 3); restarting it in 1s.").await;
    wait_gone(server).await;
    bosun.wait_count("[handler] server pid ", 2).await; // started again
    assert!(bosun.interrupt().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_dev_kills_a_handler_command_that_ignores_sigterm_after_a_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    // Ignored signals stay ignored in children: neither the shell nor its server ends on SIGTERM.
    let (mut bosun, server) = bosun_dev_with_a_grandchild(dir.path(), "trap '' TERM; sleep 1000 & echo server pid $!; wait").await;
    assert!(running(server), "the grandchild runs before bosun stops");
    bosun.send("TERM");
    bosun.wait_line("The handler server did not exit within 5s of SIGTERM; killing it.").await;
    assert!(bosun.wait_exit().await.success(), "bosun exits cleanly after killing it");
    wait_gone(server).await;
}

/// Kills `bosun dev` with SIGKILL (no handler of its own runs) and waits for the handler
/// command's whole group to end: its guard reads the end of its lifeline (`guard.rs`).
async fn killed_bosun_dev_leaves_nothing(script: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (mut bosun, server) = bosun_dev_with_a_grandchild(dir.path(), script).await;
    assert!(running(server), "the grandchild runs before bosun is killed");
    let killed = std::time::Instant::now();
    bosun.send("KILL");
    let status = bosun.wait_exit().await;
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status:?}");
    wait_gone(server).await;
    // Within seconds: the guard's grace after SIGTERM is 3 s.
    assert!(killed.elapsed() < Duration::from_secs(10), "the server ended {:?} after bosun was killed", killed.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_dev_killed_with_sigkill_leaves_no_handler_server_running() {
    killed_bosun_dev_leaves_nothing("sleep 1000 & echo server pid $!; wait").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_dev_killed_with_sigkill_leaves_no_handler_server_that_ignores_sigterm() {
    killed_bosun_dev_leaves_nothing("trap '' TERM; sleep 1000 & echo server pid $!; wait").await;
}

/// A handler server in this process whose fail-closed `check` denies every object named
/// `odd-*`; its address.
async fn validating_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let op = Operator::new()
        .on_validate("kopf.dev/v1/kopfexamples", |cause: Cause| async move {
            if cause.name().starts_with("odd-") {
                return Err(HandlerError::Permanent(bosun_sdk::PermanentError::new("no odd names")));
            }
            Ok(serde_json::Value::Null)
        })
        .id("check")
        .fail_closed();
    tokio::spawn(op.serve_with_listener(listener, std::future::pending()));
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_dev_on_a_shared_cluster_killed_with_sigkill_leaves_no_webhook_that_blocks_writes() {
    let dir = tempfile::tempdir().unwrap();
    // The cluster others use: another process's API server, as far as `bosun dev` can tell.
    let (_shared, api, kubeconfig) = support::dev_cluster(dir.path(), &[examples().join("crd.yaml")]).await;
    let handlers = validating_server().await;
    let create = |name: &str| {
        let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name, "namespace": "default"}});
        let api = api.clone();
        async move { api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &body).await }
    };
    let path = bosun_controller::state::admission::configuration_path("auto.bosun.dev", false);
    let args = ["dev", "--kubeconfig", &kubeconfig, "--handler", &handlers];

    let mut bosun = Bosun::start(dir.path(), &args);
    bosun.wait_line("bosun dev on a cluster others use: the webhooks fail open").await;
    bosun.wait_line("ValidatingWebhookConfiguration 'auto.bosun.dev' is created: 1 webhook(s).").await;
    let stored = api.get(&path).await.unwrap();
    assert_eq!(stored["webhooks"][0]["failurePolicy"], "Ignore", "{stored}");
    assert!(bosun_controller::state::admission::is_dev_run(&stored), "{stored}");
    // While it runs, its handler decides.
    let denied = create("odd-1").await.expect_err("denied by the handler");
    assert!(denied.to_string().contains("no odd names"), "{denied}");

    bosun.send("KILL");
    bosun.wait_exit().await;
    // Nobody serves the webhook now: writes go through, nothing is locked.
    create("odd-2").await.expect("a dead bosun dev's webhook blocks nothing");
    assert!(api.get(&path).await.is_ok(), "SIGKILL gave it no time to remove the configuration");

    // The next run removes what the dead one left, configures its own, and removes it at exit.
    let mut again = Bosun::start(dir.path(), &args);
    again.wait_line(&format!("Removed the admission webhook configuration left at {path}.")).await;
    again.wait_line("ValidatingWebhookConfiguration 'auto.bosun.dev' is created: 1 webhook(s).").await;
    assert!(again.interrupt().await.success(), "Ctrl-C exits cleanly");
    let gone = api.get(&path).await.expect_err("removed at a clean exit");
    assert_eq!(gone.code(), Some(404), "{gone}");
}

#[tokio::test]
async fn bosun_run_with_bad_input_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let kc = kubeconfig.to_str().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["run", "--kubeconfig", "/nonexistent/kubeconfig"], "/nonexistent/kubeconfig"),
        (&["run", "--kubeconfig", kc], "no handler server given: pass --handler ADDR"),
        (
            &["run", "--kubeconfig", kc, "--handler", "127.0.0.1:5"],
            "invalid handler server address '127.0.0.1:5': use http://host:port or unix:///path",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_bosun")).args(args).output().await.unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// `bosun dev`/`run` with handler files: what cannot work is said at once, with the fix,
/// instead of a restart loop of a child that cannot start.
#[tokio::test]
async fn handler_files_that_cannot_be_served_are_a_clear_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("handlers.py"), "import bosun\n").unwrap();
    std::fs::write(dir.path().join("handlers.js"), "").unwrap();
    std::fs::write(dir.path().join("handlers.go"), "").unwrap();
    // A Python without the SDK: `false` stands in for one whose `import bosun` fails; `true`
    // for a Node.js (no node_modules with the TypeScript SDK is anywhere above the folder).
    let cases: [(&[&str], &str); 7] = [
        (&["dev", "handlers.go"], "handlers.go: a handler file must be Python (.py) or TypeScript/JavaScript"),
        (&["dev", "handlers.py", "handlers.js"], "handlers.js: handler files of one language at a time"),
        (&["dev", "--node", "true", "handlers.js"], "Bosun's TypeScript SDK is not installed next to"),
        (&["dev", "--node", "/nonexistent/node", "handlers.js"], "cannot start Node.js (/nonexistent/node)"),
        (&["run", "missing.py"], "missing.py: no such handler file"),
        (&["dev", "--python", "false", "handlers.py"], "cannot import Bosun's Python SDK"),
        (&["dev", "handlers.py", "--", "sh", "-c", "true"], "either handler files (FILE, -m MODULE) or a handler server command"),
    ];
    for (args, error) in cases {
        let out =
            Command::new(env!("CARGO_BIN_EXE_bosun")).args(args).current_dir(dir.path()).env("RUST_BACKTRACE", "0").output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} fails");
        assert!(stderr.contains(error), "{args:?} says {error:?}; it said: {stderr}");
    }
}

/// A user error is one line, as CLIs of the field print one, even with `RUST_BACKTRACE` set;
/// `-v` asks for the detail (the causes one per line, and the backtrace).
#[tokio::test]
async fn a_user_error_is_one_line_without_a_backtrace_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &'static [&'static str]| {
        Command::new(env!("CARGO_BIN_EXE_bosun")).args(args).current_dir(dir.path()).env("RUST_BACKTRACE", "1").output()
    };
    let out = run(&["dev", "nosuchfile.py"]).await.unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines, vec!["Error: nosuchfile.py: no such handler file"], "one line: {stderr}");

    let out = run(&["dev", "-v", "nosuchfile.py"]).await.unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Error: nosuchfile.py: no such handler file"), "{stderr}");
    assert!(stderr.to_lowercase().contains("backtrace"), "-v shows the backtrace: {stderr}");
}
