//! Kopf's 17-admission end to end: the example's binary as a real handler server, the
//! controller serving the webhooks over HTTPS and configuring them on the dev cluster, and
//! the real `kubectl` applying objects, as a user would. Allowed, denied (with the handler's
//! message and code), mutated (the default stored with the object), a server-side dry run,
//! and the handler server down (the fail-closed handler denies, the fail-open one is
//! skipped); the configurations go when the controller stops.

mod support;

use support::*;

use std::path::Path;
use std::process::Command;

use bosun_tests::{kex, tools};

/// Runs `kubectl --kubeconfig K ARGS` with `stdin`; whether it succeeded, and stdout + stderr.
/// Async: the dev cluster answers kubectl on this test's runtime.
async fn kubectl(kubeconfig: &Path, args: &[&str], stdin: &str) -> (bool, String) {
    use tokio::io::AsyncWriteExt as _;
    let mut child = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let out = child.wait_with_output().await.unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn object(name: &str, field: &str, labels: &str) -> String {
    format!(
        "apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{{labels}}}\nspec:\n  field: {field}\n"
    )
}

#[tokio::test]
async fn example_17_admission_denies_mutates_and_fails_closed_through_kubectl() {
    let works = Command::new("kubectl").args(["version", "--client"]).output().is_ok_and(|o| o.status.success());
    if !tools::require_tool("`kubectl` on the PATH", works) {
        return;
    }
    let mut run = start("admission").await;
    run.controller.wait_log("MutatingWebhookConfiguration 'auto.bosun.dev' is created: 1 webhook(s).", T).await;
    let kubeconfig = run.kubeconfig();
    let apply = async |yaml: String, extra: &[&str]| {
        let mut args = vec!["apply", "-f", "-"];
        args.extend_from_slice(extra);
        kubectl(&kubeconfig, &args, &yaml).await
    };

    // Denied by validate1, with its message: nothing stored.
    let (ok, out) = apply(object("wrong-1", "wrong", ""), &[]).await;
    assert!(!ok, "a wrong field is refused: {out}");
    assert!(
        out.contains(r#"admission webhook "validate1.auto.bosun.dev" denied the request: Meh! I don't like it. Change the field."#),
        "{out}\n{}",
        run.dump()
    );
    assert!(kex::get(&run.client, "default", "wrong-1").await.is_none(), "a denied object is not stored");

    // Denied by validate2 (a field filter) with its own code.
    let (ok, out) = apply(object("lazy-1", "not-allowed", ""), &[]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("denied the request: I'm too lazy anyway. Go away!"), "{out}");

    // A server-side dry run: validate1 lets it pass (`cause.dry_run()`), nothing is stored.
    let (ok, out) = apply(object("dry-1", "wrong", ""), &["--dry-run=server"]).await;
    assert!(ok, "a dry run passes validate1: {out}\n{}", run.dump());
    assert!(kex::get(&run.client, "default", "dry-1").await.is_none(), "a dry run stores nothing");

    // Allowed, and mutated by mutate1 (its label filter matches): the default is stored, and
    // authhook's warning reaches kubectl.
    let (ok, out) = apply(object("good-1", "value", "somelabel: somevalue"), &[]).await;
    assert!(ok, "{out}\n{}", run.dump());
    assert!(out.contains("Warning: Accessing as user:"), "authhook's warning is shown: {out}");
    let stored = kex::get(&run.client, "default", "good-1").await.expect("stored");
    assert_eq!(stored["spec"]["injected"], 123, "mutate1's default: {stored:#}");
    // Without the label, mutate1 is not called.
    let (ok, out) = apply(object("plain-1", "value", ""), &[]).await;
    assert!(ok, "{out}");
    let plain = kex::get(&run.client, "default", "plain-1").await.expect("stored");
    assert!(plain["spec"].get("injected").is_none(), "{plain:#}");
    for id in ["authhook", "validate1", "mutate1"] {
        assert!(run.controller.count(&format!("Handler '{id}' succeeded.")) > 0, "{id}: {}", run.dump());
    }

    // The handler server is down: validate1 (fail-closed) denies, authhook (fail-open) is
    // skipped with an error in the controller's log.
    run.stop_server().await;
    let (ok, out) = apply(object("down-1", "value", ""), &[]).await;
    assert!(!ok, "fail-closed: {out}");
    assert!(out.contains(r#"admission webhook "validate1.auto.bosun.dev" denied the request: Handler 'validate1' failed"#), "{out}");
    run.controller.wait_log("Handler 'authhook' failed", T).await;
    assert!(run.controller.count("the request passes without it.") > 0, "{}", run.dump());
    assert!(kex::get(&run.client, "default", "down-1").await.is_none());

    // Another controller, asked to clean up, takes over (started while the handler server is
    // down, so the old one, stopped meanwhile, configures nothing more): it points the
    // configurations at its own endpoint, and removes them when it stops.
    let cleanup = bosun_controller::endpoints::admission::Setup { cleanup: true, ..Default::default() };
    run.replace_controller(bosun_controller::Settings { admission: cleanup, ..Default::default() }).await;
    run.restart_server("admission", &[]).await;
    run.controller.wait_log("ValidatingWebhookConfiguration 'auto.bosun.dev' is updated: 3 webhook(s).", T).await;
    let (ok, out) = apply(object("wrong-2", "wrong", ""), &[]).await;
    assert!(!ok && out.contains("Meh!"), "the new endpoint reviews: {out}\n{}", run.dump());
    run.stop_controller_then(|client| async move {
        let cluster = bosun_controller::cluster::Cluster::new(client);
        for kind in ["validating", "mutating"] {
            let path = format!("/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations/auto.bosun.dev");
            let gone = cluster.get(&path).await.err().and_then(|e| e.code());
            assert_eq!(gone, Some(404), "{path} is removed on a clean stop");
        }
    })
    .await;
}
