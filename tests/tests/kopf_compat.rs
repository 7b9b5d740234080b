//! Replacing a running Kopf operator with Bosun in Kopf-compatible mode, and back: objects Kopf
//! already handled are not handled again (same diffbase annotation, same finalizer), handlers
//! with long ids (a field handler, a sub-handler; Kopf keeps their progress under two key
//! versions) are not re-run in the middle of a cause, Bosun leaves none of Kopf's progress
//! behind, writes progress under the keys Kopf writes, and Kopf takes an object back from
//! Bosun in the middle of a cause without re-running what Bosun did.
//!
//! Kopf itself runs against the dev cluster: the test needs a Python with `kopf` and
//! `kubernetes` (`BOSUN_PYTHON`; else `target/ci-venv/bin/python` as `.ci/run` makes it; else
//! `python3`). Without one it fails under CI (`CI=true`) and is skipped, saying why, elsewhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bosun_controller::Settings;
use bosun_devcluster::DevCluster;
use bosun_proto::v1 as pb;
use bosun_tests::{Behaviour, Controller, Scripted, kex, spec, succeed, success};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

/// A sub-handler id of exactly 63 characters: Kopf's V2 key keeps it whole, its V1 key is cut.
const SUB: &str = "create_children/child_with_a_name_long_enough_for_kopfs_v2_keys";
/// A field handler's id over both limits: both of Kopf's keys are cut and hashed.
const FIELD: &str = "on_field_update/spec.template.spec.containers.resources.limits.memory";

const OPERATOR: &str = r#"
import os
import kopf

SUB = "child_with_a_name_long_enough_for_kopfs_v2_keys"

def called(body, handler):
    with open(os.environ["CALLS"], "a") as f:
        f.write(f"{body['metadata']['name']} {handler}\n")

@kopf.on.create('kopf.dev', 'v1', 'kopfexamples')
def create_children(body, **_):
    called(body, "create_children")

    @kopf.subhandler(id=SUB)
    def child(body, **_):
        called(body, "create_children/" + SUB)
        return {'message': 'child'}

@kopf.on.field('kopf.dev', 'v1', 'kopfexamples', field='spec.template.spec.containers.resources.limits.memory')
def on_field_update(body, **_):
    called(body, "on_field_update")
    return {'message': 'field'}

@kopf.on.create('kopf.dev', 'v1', 'kopfexamples')
def waits(body, **_):
    called(body, "waits")
    if body['metadata']['name'] == 'from-kopf' and os.environ.get("WAITS_SUCCEEDS") != "1":
        raise kopf.TemporaryError("not yet", delay=2)
    return {'message': 'waited'}

@kopf.on.delete('kopf.dev', 'v1', 'kopfexamples')
def delete_fn(body, **_):
    called(body, "delete_fn")
"#;

/// The Python to run Kopf with, or `None` (after saying why) when the test is to be skipped.
fn kopf_python() -> Option<String> {
    let ci_venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-venv/bin/python");
    let python = std::env::var("BOSUN_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| if ci_venv.exists() { ci_venv.to_string_lossy().into_owned() } else { "python3".into() });
    let check = Command::new(&python).args(["-c", "import kopf, kubernetes"]).output();
    let problem = match check {
        Ok(o) if o.status.success() => return Some(python),
        Ok(o) => format!(
            "`{python} -c 'import kopf, kubernetes'` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim().lines().last().unwrap_or("")
        ),
        Err(e) => format!("`{python}` could not be run: {e}"),
    };
    let advice = "set BOSUN_PYTHON to a Python with the packages `kopf` and `kubernetes` \
                  (python3 -m venv target/ci-venv && target/ci-venv/bin/pip install kopf kubernetes)";
    if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0") {
        panic!("Kopf is needed under CI: {problem}; {advice}");
    }
    eprintln!("SKIPPED kopf_compat: {problem}; {advice}");
    None
}

/// A Kopf operator process, killed when dropped (also when an assertion fails).
struct Kopf {
    child: Child,
    log: PathBuf,
}

impl Kopf {
    fn start(python: &str, dir: &Path, run: &str, waits_succeeds: bool) -> Kopf {
        let log = dir.join(format!("kopf-{run}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(python)
            .args(["-m", "kopf", "run", "--standalone", "-A"])
            .arg(dir.join("operator.py"))
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env("CALLS", dir.join("calls"))
            .env("WAITS_SUCCEEDS", if waits_succeeds { "1" } else { "0" })
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Kopf { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Kopf {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The handlers Kopf's operator called for object `name`, in order.
fn kopf_calls(dir: &Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
    text.lines().filter_map(|l| l.strip_prefix(&format!("{name} "))).map(String::from).collect()
}

/// Kopf's progress annotations on `o` (its own marks other than the diffbase and the touch).
fn progress_keys(o: &Value) -> BTreeSet<String> {
    o["metadata"]["annotations"]
        .as_object()
        .map(|a| {
            a.keys()
                .filter(|k| k.starts_with("kopf.zalando.org/"))
                .filter(|k| !k.ends_with("/last-handled-configuration") && !k.ends_with("/touch-dummy"))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Polls object `name` until `cond` holds; panics with `why` and the object otherwise.
async fn wait_obj(client: &kube::Client, name: &str, why: &str, cond: impl Fn(&Value) -> bool) -> Value {
    kex::wait_until(client, name, why, T, cond).await
}

fn record(o: &Value, key: &str) -> Value {
    let text = o["metadata"]["annotations"][key].as_str().unwrap_or("null");
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// Bosun's handlers, the same as the Kopf operator's; `waits` keeps failing on `from-bosun`.
fn bosun_handlers() -> Scripted {
    let parent: Behaviour = Arc::new(|_| pb::HandleResponse {
        outcome: pb::Outcome::Success as i32,
        subhandlers: vec![pb::SubHandler { id: SUB.split_once('/').unwrap().1.into(), param: b"null".to_vec(), options: None }],
        ..Default::default()
    });
    let waits: Behaviour = Arc::new(|req| {
        let obj: Value = serde_json::from_slice(&req.object).unwrap();
        if obj["metadata"]["name"] == "from-bosun" {
            pb::HandleResponse {
                outcome: pb::Outcome::TemporaryError as i32,
                message: "not yet".into(),
                delay_seconds: Some(1.0),
                ..Default::default()
            }
        } else {
            success(json!({"message": "waited in bosun"}))
        }
    });
    let mut field = spec(FIELD, pb::HandlerKind::Field);
    field.field = "spec.template.spec.containers.resources.limits.memory".into();
    Scripted::new(vec![
        (spec("create_children", pb::HandlerKind::Create), parent),
        (field, succeed(json!({"message": "field from bosun"}))),
        (spec("waits", pb::HandlerKind::Create), waits),
        (spec("delete_fn", pb::HandlerKind::Delete), succeed(Value::Null)),
    ])
    .also(SUB, succeed(json!({"message": "child from bosun"})))
}

/// How often Bosun's server was called for handler `id` on object `name`.
fn bosun_calls(server: &Scripted, name: &str, id: &str) -> usize {
    server
        .calls()
        .iter()
        .filter(|c| c.handler_id == id)
        .filter(|c| serde_json::from_slice::<Value>(&c.object).is_ok_and(|o| o["metadata"]["name"] == name))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_and_kopf_take_objects_over_from_each_other_without_handling_them_again() {
    let Some(python) = kopf_python() else { return };
    let cluster = DevCluster::start_local().await.unwrap();
    let client = cluster.client();
    kex::install_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    cluster.write_kubeconfig(&dir.path().join("kubeconfig")).unwrap();
    std::fs::write(dir.path().join("operator.py"), OPERATOR).unwrap();
    let spec_with_field = json!({"spec": {"template": {"spec": {"containers": {"resources": {"limits": {"memory": "1Gi"}}}}}}});

    // Kopf handles one object completely, and another up to `waits`, which keeps failing
    // there: the other handlers' progress (long ids under two keys each), results and the
    // finalizer are on it.
    let kopf = Kopf::start(&python, dir.path(), "first", false);
    kex::create(&client, "default", "done-by-kopf", spec_with_field.clone()).await;
    wait_obj(&client, "done-by-kopf", "Kopf to finish the creation", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
            && progress_keys(o).is_empty()
            && o["metadata"]["finalizers"] == json!(["kopf.zalando.org/KopfFinalizerMarker"])
            && o["status"]["waits"]["message"] == "waited"
    })
    .await;
    kex::create(&client, "default", "from-kopf", spec_with_field.clone()).await;
    let by_kopf = wait_obj(&client, "from-kopf", "Kopf's progress and results", |o| {
        record(o, "kopf.zalando.org/waits")["retries"].as_u64().is_some_and(|r| r >= 1)
            && o["metadata"]["finalizers"] == json!(["kopf.zalando.org/KopfFinalizerMarker"])
            && o["status"][SUB]["message"] == "child"
            && o["status"][FIELD]["message"] == "field"
    })
    .await;
    drop(kopf);
    let kopf_keys = progress_keys(&by_kopf);
    let want_keys: BTreeSet<String> = [
        "kopf.zalando.org/create_children",
        "kopf.zalando.org/create_children.child_with_a_name_long_enough_for_kopfs_v2_keys",
        "kopf.zalando.org/create_children.child_with_a_name_long_-atrUAw",
        "kopf.zalando.org/on_field_update.spec.template.spec.containers.resources.-du9bng",
        "kopf.zalando.org/on_field_update.spec.template.spec.cont-smD37A",
        "kopf.zalando.org/waits",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(kopf_keys, want_keys, "Kopf's keys, V2 and V1: {by_kopf:#}");
    for key in &want_keys {
        assert!(record(&by_kopf, key)["purpose"] == "create", "{key}: {by_kopf:#}");
    }

    // Bosun replaces Kopf: nothing is left to do on the first object, only `waits` on the other.
    let server = bosun_handlers();
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), Settings { handlers: vec![addr], kopf_compat: true, ..Default::default() });
    controller.wait_log("[default/from-kopf] Creation is processed: ", T).await;
    for id in ["create_children", SUB, FIELD] {
        assert_eq!(bosun_calls(&server, "from-kopf", id), 0, "{id} is done already: {:#?}", controller.log());
    }
    assert_eq!(bosun_calls(&server, "from-kopf", "waits"), 1);
    // Nothing to do for it: only Kopf's debug line of the cause seen ("Resuming is in progress").
    let about_it: Vec<String> = controller.log().into_iter().filter(|l| l.contains("[default/done-by-kopf]")).collect();
    assert!(
        about_it.iter().all(|l| l.starts_with("DEBUG [default/done-by-kopf] Resuming is in progress: ")),
        "nothing to do for it: {:#?}",
        controller.log()
    );
    assert!(server.calls().iter().all(|c| !String::from_utf8_lossy(&c.object).contains("done-by-kopf")));
    assert_eq!(controller.count("[default/from-kopf] Creation is processed: "), 1);
    assert_eq!(controller.count("[default/from-kopf] Handler 'waits' succeeded."), 1);
    let taken = wait_obj(&client, "from-kopf", "Bosun's diffbase", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
    })
    .await;
    assert_eq!(progress_keys(&taken), BTreeSet::new(), "no progress of either key version is left: {taken:#}");
    assert_eq!(taken["status"][SUB]["message"], "child", "Kopf's results stay: {taken:#}");

    // A new object, in the middle of its cause under Bosun: progress under Kopf's keys.
    kex::create(&client, "default", "from-bosun", spec_with_field.clone()).await;
    controller.wait_log("[default/from-bosun] Handler 'waits' failed temporarily: not yet", T).await;
    let by_bosun = wait_obj(&client, "from-bosun", "Bosun's progress", |o| {
        progress_keys(o) == want_keys && record(o, "kopf.zalando.org/create_children")["success"] == true
    })
    .await;
    for (v2, v1) in [
        (
            "kopf.zalando.org/create_children.child_with_a_name_long_enough_for_kopfs_v2_keys",
            "kopf.zalando.org/create_children.child_with_a_name_long_-atrUAw",
        ),
        (
            "kopf.zalando.org/on_field_update.spec.template.spec.containers.resources.-du9bng",
            "kopf.zalando.org/on_field_update.spec.template.spec.cont-smD37A",
        ),
    ] {
        assert_eq!(record(&by_bosun, v2)["success"], true, "{v2}: {by_bosun:#}");
        assert_eq!(record(&by_bosun, v1), record(&by_bosun, v2), "both versions hold the same record: {by_bosun:#}");
    }

    // Kopf's finalizer is Bosun's now: deleting runs Bosun's delete handler, then it goes.
    kex::delete(&client, "default", "from-kopf").await;
    controller.wait_log("[default/from-kopf] Deletion is processed: 1 succeeded; 0 failed.", T).await;
    kex::wait_gone(&client, "default", "from-kopf").await;
    controller.stop().await;
    stopper.stop().await;

    // Kopf takes `from-bosun` back and only finishes `waits`.
    let kopf = Kopf::start(&python, dir.path(), "second", true);
    // Kopf writes the object (annotations) and then its status (results) in two patches: both are awaited.
    let finished = wait_obj(&client, "from-bosun", "Kopf to finish the creation", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
            && progress_keys(o).is_empty()
            && o["status"]["waits"].is_object()
    })
    .await;
    assert_eq!(kopf_calls(dir.path(), "from-bosun"), vec!["waits"], "Kopf re-ran nothing Bosun did: {}", kopf.log());
    assert!(kopf.log().contains("[default/from-bosun] Handler 'waits' succeeded."), "{}", kopf.log());
    assert_eq!(finished["status"]["waits"]["message"], "waited", "{finished:#}");
    assert_eq!(finished["status"][SUB]["message"], "child from bosun", "{finished:#}");
    drop(kopf);
}

/// Kopf 1.45.2's own diffbase for each body read from stdin: `AnnotationsDiffBaseStorage`
/// under the prefix given, `build()` then `store()`, as the patches it makes.
const KOPF_DIFFBASE: &str = r#"
import json, sys
from kopf import AnnotationsDiffBaseStorage
from kopf._cogs.structs import bodies, patches
storage = AnnotationsDiffBaseStorage(prefix=sys.argv[1])
out = []
for raw in json.load(sys.stdin):
    body, patch = bodies.Body(raw), patches.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    out.append(patch)
json.dump(out, sys.stdout)
"#;

#[test]
fn the_diffbase_annotation_is_byte_for_byte_the_one_kopf_writes() {
    use bosun_controller::state::essence::{EssenceRules, encode_diffbase, essence};
    use bosun_controller::state::storage::{ObjectState, Persistence, Storage, StorageKind};
    let Some(python) = kopf_python() else { return };
    let bodies = json!([
        {"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
         "metadata": {"name": "a", "namespace": "default", "uid": "u", "resourceVersion": "1", "labels": {"b": "2", "a": "1"},
                      "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "x": "ü",
                                      "kopf.zalando.org/create_fn": "{}", "kopf.zalando.org/last-handled-configuration": "{}\n"}},
         "spec": {"z": 1, "a": [1.0, 0.00001, 0.0001, 1e16, 1e15, 12.5, -0.0, 5e-324, 18446744073709551615u64],
                  "s": "ü😀\u{2028}<&>\u{7f}\n\u{1}\"\\/", "n": null, "t": true, "é": {}},
         "status": {"x": 1}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {}, "annotations": {}}, "data": {"k": "v"}},
        {"metadata": {"annotations": {"other.op/kopf-managed": "yes", "other.op/last-handled-configuration": "{}",
                                      "sub.kopf.zalando.org/x": "1", "plain/y": "2"}}, "spec": {}},
        {"metadata": {"annotations": {"my.op.example/kopf-managed": "yes", "my.op.example/create_fn": "{}"}}, "spec": {"x": 1e100}},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"ownerReferences": [{"kind": "Deployment", "name": "d"}]},
         "spec": {"replicas": 1}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}},
    ]);
    // `--kopf-compat`, and Kopf's storages under an operator's own prefix (v1 keys, Kopf's default).
    let chosen = Persistence { prefix: Some("my.op.example".into()), kopf_keys: Some(true), ..Default::default() };
    for storage in [Storage::kopf(), chosen.over(Storage::kopf())] {
        assert_eq!(storage.diffbase_kind, StorageKind::Annotations);
        let mut kopf = Command::new(&python)
            .args(["-c", KOPF_DIFFBASE, &storage.prefix])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        serde_json::to_writer(kopf.stdin.take().unwrap(), &bodies).unwrap();
        let out = kopf.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let by_kopf: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        // The essence's rules as the controller makes them for a resource.
        let rules = EssenceRules { own_prefixes: vec![format!("{}/", storage.prefix), "kopf.zalando.org/".into()], ..Default::default() };
        for (body, kopfs) in bodies.as_array().unwrap().iter().zip(&by_kopf) {
            let desired = ObjectState { diffbase: Some(encode_diffbase(&essence(body, &rules))), ..Default::default() };
            let (mut main, mut status) = (json!({}), json!({}));
            storage.patch(body, &desired, &[], &mut main, &mut status);
            // Byte for byte: the annotations' texts, not only what they parse to.
            assert_eq!(main.to_string(), kopfs.to_string(), "{} over {body}", storage.prefix);
            assert_eq!(status, json!({}));
        }
    }
}
